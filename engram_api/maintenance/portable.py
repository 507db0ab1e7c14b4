"""The portable export: every memory's payload and dense vector, readable without Engram.

An export is a directory:
- ``memories.jsonl.gz``: one JSON object per line, ``{"id", "payload", "vector"}``, the vector
  as base64 of little-endian float32 (exact, compact);
- ``manifest.json``: format and version, collection, time, count, dimension, embedding models,
  and the file's sha256 and size, checked before anything is read back.

Sparse (BM25) vectors are not exported: they are a pure function of the text and are rebuilt
on import, so an export made from one store kind imports into the other.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from engram_api.embeddings.bm25 import Bm25Encoder
from engram_api.errors import EngramError
from engram_api.store.base import DenseVector, Match, MemoryStore, PointWrite, StoredPoint

FORMAT: Final = "engram-export"
FORMAT_VERSION: Final = 1
DATA_FILE: Final = "memories.jsonl.gz"
MANIFEST_FILE: Final = "manifest.json"
VECTOR_ENCODING: Final = "base64-float32-le"
_CHUNK: Final = 1 << 20


class ExportError(EngramError):
    kind = "invalid_backup"


@dataclass(frozen=True)
class Manifest:
    collection: str
    created_at: str
    count: int
    dimension: int
    embedding_models: dict[str, int]
    sha256: str
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "collection": self.collection,
            "created_at": self.created_at,
            "count": self.count,
            "dimension": self.dimension,
            "vector_encoding": VECTOR_ENCODING,
            "embedding_models": dict(self.embedding_models),
            "file": DATA_FILE,
            "sha256": self.sha256,
            "bytes": self.bytes,
        }


def encode_vector(v: DenseVector) -> str:
    return base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(s: str) -> DenseVector:
    return np.frombuffer(base64.b64decode(s), dtype="<f4").astype(np.float32)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


async def all_points(store: MemoryStore, page_size: int) -> AsyncIterator[list[StoredPoint]]:
    """Every point, archived ones included, with vectors, a page at a time."""
    offset: str | None = None
    while True:
        page, offset = await store.scroll(
            Match(archived=None), limit=page_size, offset=offset, with_vectors=True
        )
        if page:
            yield page
        if offset is None:
            return


def _make_dir(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=False)


async def write_export(
    store: MemoryStore,
    dest: Path,
    *,
    collection: str,
    created_at: str,
    page_size: int = 256,
    progress: Callable[[int], None] | None = None,
) -> Manifest:
    """Write ``dest/`` (must not exist yet); the manifest is written last, so a directory
    without one is an interrupted export and is never restored."""
    _make_dir(dest)
    data = dest / DATA_FILE
    count = 0
    dimension = 0
    models: Counter[str] = Counter()
    with gzip.open(data, "wt", encoding="utf-8") as out:
        async for page in all_points(store, page_size):
            for p in page:
                if p.dense is None:
                    raise ExportError(f"memory {p.id} has no dense vector; cannot export it")
                dimension = dimension or len(p.dense)
                models[str(p.payload.get("embedding_model", ""))] += 1
                line = {"id": p.id, "payload": p.payload, "vector": encode_vector(p.dense)}
                out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
                count += 1
            if progress is not None:
                progress(count)
    manifest = Manifest(
        collection=collection,
        created_at=created_at,
        count=count,
        dimension=dimension,
        embedding_models=dict(models),
        sha256=sha256_file(data),
        bytes=data.stat().st_size,
    )
    tmp = dest / (MANIFEST_FILE + ".tmp")
    tmp.write_text(json.dumps(manifest.to_dict(), indent=2), encoding="utf-8")
    os.replace(tmp, dest / MANIFEST_FILE)
    return manifest


def read_manifest(path: Path) -> Manifest:
    """Load and verify an export directory (format, version, checksum, size)."""
    mpath = path / MANIFEST_FILE
    try:
        raw = json.loads(mpath.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExportError(
            f"{path}: not an Engram export (no readable {MANIFEST_FILE}: {exc.strerror})"
        ) from None
    except ValueError:
        raise ExportError(f"{mpath}: not valid JSON") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ExportError(f"{mpath}: not an Engram export manifest")
    if raw.get("format_version") != FORMAT_VERSION:
        raise ExportError(
            f"{mpath}: export format version {raw.get('format_version')} is not supported "
            f"(this Engram reads version {FORMAT_VERSION})"
        )
    if raw.get("vector_encoding") != VECTOR_ENCODING:
        raise ExportError(f"{mpath}: unknown vector encoding {raw.get('vector_encoding')!r}")
    try:
        manifest = Manifest(
            collection=str(raw["collection"]),
            created_at=str(raw["created_at"]),
            count=int(raw["count"]),
            dimension=int(raw["dimension"]),
            embedding_models={str(k): int(v) for k, v in dict(raw["embedding_models"]).items()},
            sha256=str(raw["sha256"]),
            bytes=int(raw["bytes"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ExportError(f"{mpath}: manifest field missing or wrong ({exc})") from None
    data = path / DATA_FILE
    if not data.is_file():
        raise ExportError(f"{path}: {DATA_FILE} is missing")
    if data.stat().st_size != manifest.bytes or sha256_file(data) != manifest.sha256:
        raise ExportError(
            f"{data}: checksum does not match the manifest; the export is damaged or incomplete"
        )
    return manifest


def read_points(path: Path, dimension: int) -> Iterator[tuple[str, dict[str, Any], DenseVector]]:
    with gzip.open(path / DATA_FILE, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            try:
                row = json.loads(line)
                vec = decode_vector(row["vector"])
                pid, payload = str(row["id"]), dict(row["payload"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ExportError(f"{path / DATA_FILE} line {n}: unreadable ({exc})") from None
            if len(vec) != dimension:
                raise ExportError(
                    f"{path / DATA_FILE} line {n}: vector has {len(vec)} values, "
                    f"the manifest says {dimension}"
                )
            yield pid, payload, vec


def to_write(bm25: Bm25Encoder, pid: str, payload: dict[str, Any], vec: DenseVector) -> PointWrite:
    content = str(payload.get("content", ""))
    context = str(payload.get("context", ""))
    text = f"{content}\n{context}" if context else content
    return PointWrite(id=pid, dense=vec, sparse=bm25.document(text), payload=payload)

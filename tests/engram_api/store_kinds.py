"""The two store implementations every contract test runs against."""

from __future__ import annotations

from pathlib import Path

from engram_api.store.base import MemoryStore
from engram_api.store.edge import EdgeStore
from engram_api.store.qdrant_server import QdrantServerStore

DIM = 384
KINDS = ["edge", "qdrant-client"]


def make_store(kind: str, tmp_path: Path) -> MemoryStore:
    if kind == "edge":
        return EdgeStore(tmp_path / "edge")
    return QdrantServerStore("memories", path=tmp_path / "qc")

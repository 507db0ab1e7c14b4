"""Rebuild every memory's vectors with another embedding model, then switch over.

The copy goes into a new collection named after the target model; the live collection is
never touched, so an interrupted run loses nothing and a rerun skips what is already copied
(ids are kept). Only a complete copy is switched to: for the embedded store a pointer file in
the data dir, for a Qdrant server a collection alias when the configured name is one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engram_api.embeddings.base import Embedder
from engram_api.embeddings.bm25 import TOKENIZER as bm25_tokenizer
from engram_api.embeddings.bm25 import Bm25Encoder
from engram_api.store.base import Match, MemoryStore, PointWrite

POINTER_FILE = "active-collections.json"


def target_name(logical: str, model_id: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", model_id).strip("-").lower()[:40]
    return f"{logical}__{slug}"


def resolve_embedded(qdrant_dir: Path, logical: str) -> str:
    """The physical shard directory name behind a logical collection name."""
    try:
        mapping = json.loads((qdrant_dir / POINTER_FILE).read_text())
    except (OSError, ValueError):
        return logical
    return str(mapping.get(logical, logical))


def switch_embedded(qdrant_dir: Path, logical: str, physical: str) -> None:
    path = qdrant_dir / POINTER_FILE
    try:
        mapping = json.loads(path.read_text())
    except (OSError, ValueError):
        mapping = {}
    mapping[logical] = physical
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(mapping, indent=2))
    tmp.replace(path)  # atomic: a reader sees the old or the new pointer, never half of one


@dataclass
class ReembedResult:
    copied: int
    skipped: int
    total: int


async def copy_with_new_vectors(
    source: MemoryStore,
    target: MemoryStore,
    embedder: Embedder,
    *,
    batch: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> ReembedResult:
    """Copy every point (archived too) from source to target, re-embedding its text."""
    bm25 = Bm25Encoder()
    everything = Match(archived=None)
    total = await source.count(everything)
    copied = skipped = 0
    offset: str | None = None
    while True:
        page, offset = await source.scroll(everything, limit=batch, offset=offset)
        if page:
            have = {p.id for p in await target.retrieve([p.id for p in page])}
            todo = [p for p in page if p.id not in have]
            skipped += len(page) - len(todo)
            texts = [memory_text(p.payload) for p in todo]
            vectors = await embedder.embed_documents(texts) if todo else []
            await target.upsert(
                [
                    PointWrite(
                        p.id,
                        vec,
                        bm25.document(text),
                        {
                            **p.payload,
                            "embedding_model": embedder.model_id,
                            "sparse_tokenizer": bm25_tokenizer,
                        },
                    )
                    for p, vec, text in zip(todo, vectors, texts, strict=True)
                ]
            )
            copied += len(todo)
            if progress:
                progress(copied + skipped, total)
        if offset is None:
            break
    return ReembedResult(copied=copied, skipped=skipped, total=total)


async def repair_stray_vectors(store: MemoryStore, embedder: Embedder, *, batch: int = 64) -> int:
    """Re-embed, with the collection's model, memories whose vectors another model made.

    Older releases stored a fallback's vectors beside the primary's when the primary was
    down; those are not comparable with the rest. Only vectors and ``embedding_model``
    change (payloads are not rewritten, so a concurrent forget or access count is kept); a
    rerun after an interruption picks up what is left. Returns how many were repaired.
    """
    everything = Match(archived=None)
    stray = [m for m in await store.facet("embedding_model", everything) if m != embedder.model_id]
    repaired = 0
    for model in stray:
        which = Match(archived=None, embedding_models=frozenset({model}))
        while True:
            # Repaired memories leave the filter, so each page starts from the beginning.
            page, _ = await store.scroll(which, limit=batch)
            if not page:
                break
            vectors = await embedder.embed_documents([memory_text(p.payload) for p in page])
            await store.set_vectors([(p.id, v) for p, v in zip(page, vectors, strict=True)])
            await store.set_payloads(
                [([p.id for p in page], {"embedding_model": embedder.model_id})]
            )
            repaired += len(page)
    return repaired


def memory_text(payload: dict[str, object]) -> str:
    """The text a memory is embedded from (content, and its context on a second line)."""
    content = str(payload.get("content", ""))
    context = payload.get("context")
    return f"{content}\n{context}" if context else content

"""Re-embedding copies into a fresh collection and resumes where an interrupted run stopped."""

from __future__ import annotations

from pathlib import Path

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.memory.reembed import copy_with_new_vectors, resolve_embedded, switch_embedded
from engram_api.memory.service import MemoryService
from engram_api.store.base import Match
from engram_api.store.edge import EdgeStore


async def test_an_interrupted_copy_resumes_without_redoing_or_losing_work(
    service: MemoryService, tmp_path: Path
) -> None:
    for i in range(10):
        await service.add(agent="main", content=f"memory {i}", scope="global")
    target = EdgeStore(tmp_path / "target")
    await target.open(64)
    emb = HashingEmbedder(64)
    first_page, _ = await service.store.scroll(Match(archived=None), limit=4)
    # What an interrupted run leaves behind: some points already copied.
    partial = await copy_with_new_vectors(service.store, target, emb, batch=4)
    assert partial.copied == 10
    await target.delete([p.id for p in (await target.scroll(Match(), limit=100))[0]][4:])
    resumed = await copy_with_new_vectors(service.store, target, emb, batch=4)
    assert (resumed.copied, resumed.skipped, resumed.total) == (6, 4, 10)
    copied = await target.retrieve([p.id for p in first_page], with_vectors=True)
    assert all(p.payload["embedding_model"] == "hash/64" for p in copied)
    assert all(p.dense is not None and len(p.dense) == 64 for p in copied)
    await target.close()


def test_the_switch_pointer_is_replaced_atomically(tmp_path: Path) -> None:
    assert resolve_embedded(tmp_path, "memories") == "memories"
    switch_embedded(tmp_path, "memories", "memories__v2")
    assert resolve_embedded(tmp_path, "memories") == "memories__v2"
    assert resolve_embedded(tmp_path, "other") == "other"
    assert not list(tmp_path.glob("*.tmp"))

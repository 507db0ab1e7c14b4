"""One contract, two stores: qdrant-edge (embedded) and qdrant-client (local mode stand-in)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from engram_api.embeddings.bm25 import Bm25Encoder
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.store.base import Match, MemoryStore, PointWrite, SchemaMismatch
from engram_api.store.edge import EdgeStore
from tests.engram_api.store_kinds import DIM, make_store

EMB = HashingEmbedder(DIM)
BM25 = Bm25Encoder()


def point(text: str, scope: str = "global", archived: int = 0, **extra: object) -> PointWrite:
    payload = {
        "content": text,
        "scope": scope,
        "scope_kind": scope.split(":", 1)[0],
        "mem_type": "fact",
        "trust": "medium",
        "archived": archived,
        "created_at_epoch": 1000.0,
        **extra,
    }
    return PointWrite(str(uuid.uuid4()), EMB.embed_one(text), BM25.document(text), payload)


async def test_archived_flag_filters_work_in_both_directions(store: MemoryStore) -> None:
    await store.upsert([point("alpha"), point("beta", archived=1), point("gamma")])
    assert await store.count(Match(archived=False)) == 2
    assert await store.count(Match(archived=True)) == 1
    assert await store.count(Match(archived=None)) == 3


async def test_scope_selector_matches_exact_scopes_or_whole_kinds(store: MemoryStore) -> None:
    await store.upsert(
        [point("a", "global"), point("b", "group:x"), point("c", "group:y"), point("d", "dm")]
    )
    assert await store.count(Match(scopes=frozenset({"global", "dm"}))) == 2
    assert await store.count(Match(scope_kinds=frozenset({"group"}))) == 2
    both = Match(scopes=frozenset({"dm"}), scope_kinds=frozenset({"group"}))
    assert await store.count(both) == 3
    assert await store.count(Match(scopes=frozenset(), scope_kinds=frozenset())) == 0


async def test_dense_search_ranks_the_closest_text_first(store: MemoryStore) -> None:
    await store.upsert(
        [point("the deploy uses helm charts"), point("user likes green tea"), point("cats sleep")]
    )
    hits = await store.query(
        dense=EMB.embed_one("helm chart deploy"), sparse=None, match=Match(), limit=2, mode="dense"
    )
    assert hits[0].payload["content"] == "the deploy uses helm charts"
    assert hits[0].score > hits[1].score


@pytest.mark.parametrize("mode", ["sparse", "hybrid"])
async def test_lexical_and_hybrid_search_find_rare_words(store: MemoryStore, mode: str) -> None:
    await store.upsert([point(f"filler memory number {i}") for i in range(20)])
    await store.upsert([point("the zanzibar cluster runs postgres")])
    q = "zanzibar"
    hits = await store.query(
        dense=EMB.embed_one(q),
        sparse=BM25.query(q),
        match=Match(),
        limit=3,
        mode=mode,  # type: ignore[arg-type]
    )
    assert hits[0].payload["content"] == "the zanzibar cluster runs postgres"


async def test_search_never_returns_points_outside_the_filter(store: MemoryStore) -> None:
    await store.upsert([point("secret plans", "group:x"), point("public plans", "global")])
    hits = await store.query(
        dense=EMB.embed_one("plans"),
        sparse=BM25.query("plans"),
        match=Match(scopes=frozenset({"global"})),
        limit=10,
        mode="hybrid",
    )
    assert [h.payload["scope"] for h in hits] == ["global"]


async def test_scroll_walks_every_point_exactly_once(store: MemoryStore) -> None:
    written = [point(f"memory {i}") for i in range(23)]
    await store.upsert(written)
    seen: list[str] = []
    offset = None
    while True:
        page, offset = await store.scroll(Match(), limit=5, offset=offset)
        seen += [p.id for p in page]
        if offset is None:
            break
    assert sorted(seen) == sorted(p.id for p in written)


async def test_upsert_with_the_same_id_replaces_not_duplicates(store: MemoryStore) -> None:
    p = point("one")
    await store.upsert([p])
    await store.upsert([p])
    assert await store.count(Match()) == 1


async def test_set_payload_facet_retrieve_and_delete(store: MemoryStore) -> None:
    a, b = point("a", "group:x"), point("b", "global")
    await store.upsert([a, b])
    await store.set_payload([a.id], {"trust": "high"})
    got = await store.retrieve([a.id], with_vectors=True)
    assert got[0].payload["trust"] == "high"
    assert got[0].dense is not None
    assert np.allclose(got[0].dense, a.dense, atol=1e-5)
    assert await store.facet("scope", Match()) == {"group:x": 1, "global": 1}
    await store.delete([a.id])
    assert await store.retrieve([a.id]) == []


async def test_batch_neighbour_queries_respect_the_threshold(store: MemoryStore) -> None:
    a, b, c = point("green tea is nice"), point("green tea is nice!"), point("rust compiler")
    await store.upsert([a, b, c])
    results = await store.query_batch(
        [a.dense, c.dense], match=Match(), limit=5, score_threshold=0.9
    )
    assert {p.id for p in results[0]} == {a.id, b.id}
    assert [p.id for p in results[1]] == [c.id]


async def test_created_at_range_filters(store: MemoryStore) -> None:
    await store.upsert([point("old", created_at_epoch=10.0), point("new", created_at_epoch=99.0)])
    assert await store.count(Match(created_before_epoch=50.0)) == 1
    assert await store.count(Match(created_after_epoch=50.0)) == 1


@pytest.mark.parametrize("kind", ["edge", "qdrant-client"])
async def test_reopening_with_another_dimension_is_refused(kind: str, tmp_path: Path) -> None:
    s = make_store(kind, tmp_path)
    await s.open(DIM)
    await s.upsert([point("x")])
    await s.close()
    s2 = make_store(kind, tmp_path)
    with pytest.raises(SchemaMismatch, match="reembed"):
        await s2.open(DIM * 2)
    await s2.close()


async def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    s = EdgeStore(tmp_path / "edge")
    await s.open(DIM)
    p = point("durable")
    await s.upsert([p])
    await s.close()
    s2 = EdgeStore(tmp_path / "edge")
    await s2.open(DIM)
    assert [x.payload["content"] for x in await s2.retrieve([p.id])] == ["durable"]
    await s2.close()


async def test_archiving_through_payload_updates_keeps_scoped_filters_exact(
    store: MemoryStore,
) -> None:
    a, b, c = point("a", "group:x"), point("b", "group:x"), point("c", "agent:w")
    await store.upsert([a, b, c])
    active_x = Match(scopes=frozenset({"group:x"}), archived=False)
    active_agents = Match(scope_kinds=frozenset({"agent"}), archived=False)
    await store.set_payload([a.id], {"archived": 1, "archived_reason": "test"})
    await store.set_payloads([([c.id], {"archived": 1})])
    assert await store.count(active_x) == 1
    assert await store.count(active_agents) == 0
    assert await store.count(Match(scopes=frozenset({"group:x"}), archived=True)) == 1
    hits = await store.query(dense=a.dense, sparse=None, match=active_x, limit=5, mode="dense")
    assert [h.id for h in hits] == [b.id]
    await store.set_payloads([([a.id, c.id], {"archived": 0})])
    assert await store.count(active_x) == 2
    assert await store.count(active_agents) == 1

"""The five operations through the real engine on both stores."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest

from engram_api.embeddings.base import EmbeddingError, Vector
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.errors import InvalidInput, NotFound, PermissionDenied, SecretDetected, Unavailable
from engram_api.memory.guards import SecretGuard
from engram_api.memory.model import content_hash, content_point_id
from engram_api.memory.policy import PolicyEngine
from engram_api.memory.service import MemoryService
from engram_api.settings import LimitSettings
from engram_api.store.base import Match, MemoryStore
from engram_contract.permissions import (
    AgentPolicy,
    MemType,
    Operation,
    PermissionConfig,
    Trust,
    builtin_permission_config,
)


class CountingEmbedder(HashingEmbedder):
    """Counts provider calls: the engine must make one per add and per search."""

    def __init__(self) -> None:
        super().__init__(384)
        self.calls = 0

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.calls += 1
        return await super().embed_documents(texts)

    async def embed_query(self, text: str) -> Vector:
        self.calls += 1
        return await super().embed_query(text)


class DownEmbedder(HashingEmbedder):
    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        raise EmbeddingError("provider timed out")

    async def embed_query(self, text: str) -> Vector:
        raise EmbeddingError("provider timed out")


def make_service(
    store: MemoryStore, config: PermissionConfig | None = None, **kw: object
) -> MemoryService:
    return MemoryService(
        store=store,
        embedder=kw.pop("embedder", HashingEmbedder(384)),  # type: ignore[arg-type]
        policy=PolicyEngine(config or builtin_permission_config()),
        guard=SecretGuard(),
        limits=LimitSettings(),
    )


async def test_add_stores_a_memory_whose_id_derives_from_its_scope_type_and_text(
    service: MemoryService,
) -> None:
    out = await service.add(
        agent="main",
        content="User prefers dark mode",
        scope="global",
        mem_type="preference",
        trust="high",
        source="user_direct",
    )
    assert out["status"] == "stored"
    assert out["id"] == content_point_id(
        "global", "preference", content_hash("User prefers dark mode")
    )
    mem = out["memory"]
    assert (mem["scope"], mem["mem_type"], mem["trust"], mem["source"]) == (
        "global",
        "preference",
        "high",
        "user_direct",
    )
    stored = await service.store.retrieve([out["id"]])
    assert stored[0].payload["archived"] == 0
    assert stored[0].payload["embedding_model"] == "hash/384"


async def test_exact_duplicate_in_the_same_scope_and_type_returns_the_existing_memory(
    service: MemoryService,
) -> None:
    first = await service.add(agent="main", content="Project uses PostgreSQL 16", scope="global")
    again = await service.add(
        agent="main", content="  Project uses   PostgreSQL 16 ", scope="global"
    )
    assert again["status"] == "duplicate"
    assert again["id"] == first["id"]
    assert await service.store.count(Match()) == 1
    other_scope = await service.add(agent="main", content="Project uses PostgreSQL 16", scope="dm")
    other_type = await service.add(
        agent="main", content="Project uses PostgreSQL 16", scope="global", mem_type="decision"
    )
    assert other_scope["status"] == other_type["status"] == "stored"
    assert await service.store.count(Match()) == 3


async def test_trust_above_the_agents_maximum_is_capped_and_the_answer_says_so(
    store: MemoryStore,
) -> None:
    config = PermissionConfig(
        agents={
            "w": AgentPolicy(
                read=["agent:w"], write=["agent:w"], operations=[Operation.add], max_trust=Trust.low
            )
        }
    )
    svc = make_service(store, config)
    out = await svc.add(
        agent="w",
        content="deploy with make deploy",
        scope="agent:w",
        mem_type="procedure",
        trust="high",
    )
    assert out["memory"]["trust"] == "low"
    assert out["trust_capped"] is True
    assert "lowered" in out["notes"][0]
    await svc.aclose()


async def test_a_secret_is_refused_and_nothing_is_stored(service: MemoryService) -> None:
    with pytest.raises(SecretDetected):
        await service.add(
            agent="main", content="db notes", context="password=hunter22", scope="global"
        )
    assert await service.store.count(Match(archived=None)) == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": "x" * 8001}, "content"),
        ({"context": "y" * 2001}, "context"),
        ({"scope": ""}, "scope"),
        ({"scope": "group:"}, "scope"),
        ({"scope": "group:a b"}, "scope"),
        ({"scope": "all"}, "scope"),
        ({"scope": "cross:team"}, "scope"),
        ({"scope": "project:x"}, "scope"),
        ({"mem_type": "gossip"}, "mem_type"),
        ({"trust": "absolute"}, "trust"),
        ({"source": "rumour"}, "source"),
        ({"agent": ""}, "agent"),
        ({"agent": "a/b"}, "agent"),
    ],
)
async def test_bad_input_is_rejected_naming_the_field(
    service: MemoryService, kwargs: dict[str, str], field: str
) -> None:
    args = {"agent": "main", "content": "fine content", "scope": "global"} | kwargs
    with pytest.raises(InvalidInput) as exc:
        await service.add(**args)
    assert exc.value.field == field
    assert str(exc.value).startswith(field)
    assert await service.store.count(Match(archived=None)) == 0


@pytest.mark.parametrize(("limit", "ok"), [(0, False), (1, True), (50, True), (51, False)])
async def test_search_limit_must_be_between_1_and_50(
    service: MemoryService, limit: int, ok: bool
) -> None:
    if ok:
        await service.search(agent="main", query="anything", limit=limit)
    else:
        with pytest.raises(InvalidInput, match="limit"):
            await service.search(agent="main", query="anything", limit=limit)


async def test_permission_is_checked_before_anything_is_written(service: MemoryService) -> None:
    with pytest.raises(PermissionDenied) as exc:
        await service.add(agent="main", content="worker note", scope="agent:writer")
    assert exc.value.field == "scope"
    with pytest.raises(PermissionDenied):
        await service.add(agent="stranger", content="hello", scope="global")
    assert await service.store.count(Match(archived=None)) == 0


async def test_user_direct_source_needs_permission(store: MemoryStore) -> None:
    config = PermissionConfig(
        agents={"bot": AgentPolicy(read=["global"], write=["global"], operations=[Operation.add])}
    )
    svc = make_service(store, config)
    with pytest.raises(PermissionDenied, match="user_direct"):
        await svc.add(agent="bot", content="the user said so", scope="global", source="user_direct")
    await svc.aclose()


async def test_search_merges_scoped_and_global_by_relevance(service: MemoryService) -> None:
    await service.add(agent="main", content="kubernetes deploys use helm charts", scope="global")
    await service.add(agent="main", content="lunch is at noon", scope="group:team")
    await service.add(
        agent="main", content="team deploys kubernetes on fridays with helm", scope="group:team"
    )
    out = await service.search(
        agent="main", query="helm kubernetes deploys", scope="group:team", limit=3
    )
    assert out["scopes_searched"] == ["group:team", "global"]
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True)
    assert {r["scope"] for r in out["results"][:2]} == {"global", "group:team"}


async def test_trust_never_lets_a_weak_match_outrank_a_strong_one(store: MemoryStore) -> None:
    svc = make_service(store)
    svc.search_mode = "dense"
    await svc.add(
        agent="main", content="the staging database is postgres", scope="global", trust="low"
    )
    await svc.add(agent="main", content="bananas are yellow", scope="global", trust="high")
    out = await svc.search(agent="main", query="staging database postgres", limit=2)
    assert out["results"][0]["content"] == "the staging database is postgres"
    high_only = await svc.search(agent="main", query="staging database postgres", trust_min="high")
    assert [r["trust"] for r in high_only["results"]] == ["high"]
    await svc.aclose()


async def test_archived_memories_are_never_returned_and_can_be_restored(
    service: MemoryService,
) -> None:
    out = await service.add(agent="main", content="old office is in berlin", scope="global")
    forgotten = await service.forget(agent="main", memory_id=out["id"], reason="moved to paris")
    assert forgotten["status"] == "archived"
    found = await service.search(agent="main", query="office berlin")
    assert found["results"] == []
    page = await service.get_all(agent="main", include_archived=True)
    assert page["results"][0]["archived_reason"] == "moved to paris"
    assert (await service.restore(agent="main", memory_id=out["id"]))["status"] == "restored"
    assert (await service.search(agent="main", query="office berlin"))["count"] == 1


async def test_a_forget_reason_holding_a_secret_is_refused_and_the_memory_stays_active(
    service: MemoryService,
) -> None:
    out = await service.add(agent="main", content="old office is in berlin", scope="global")
    with pytest.raises(SecretDetected) as exc:
        await service.forget(
            agent="main", memory_id=out["id"], reason="rotated; new one is DB_PASSWORD=hunter22"
        )
    assert str(exc.value).startswith("reason: ")
    assert "hunter22" not in str(exc.value)
    page = await service.get_all(agent="main", include_archived=True)
    assert [(m["id"], m["archived"]) for m in page["results"]] == [(out["id"], False)]


async def test_an_oversized_body_is_refused_by_length_before_any_scan(
    service: MemoryService,
) -> None:
    scanned: list[str] = []
    real_find = service.guard.find
    service.guard.find = lambda text: scanned.append(text) or real_find(text)  # type: ignore[method-assign]
    with pytest.raises(InvalidInput, match="content: must be at most 8000 characters"):
        await service.add(agent="main", content="a-" * 30000, scope="global")
    assert scanned == []


async def test_forget_cannot_reach_memories_the_agent_cannot_see(service: MemoryService) -> None:
    out = await service.add(
        agent="devops", content="runbook step one", scope="agent:ops", mem_type="procedure"
    )
    with pytest.raises(PermissionDenied, match="forget"):
        await service.forget(agent="stranger", memory_id=out["id"], reason="x")
    with pytest.raises(PermissionDenied, match="cannot change"):
        await service.forget(agent="main", memory_id=out["id"], reason="x")
    with pytest.raises(InvalidInput, match="id"):
        await service.forget(agent="main", memory_id="not-an-id", reason="x")
    with pytest.raises(NotFound):
        await service.forget(agent="devops", memory_id=str(uuid.uuid4()), reason="x")


async def test_access_counts_lose_no_increment_under_concurrent_searches(
    service: MemoryService,
) -> None:
    out = await service.add(agent="main", content="the wiki lives at wiki.internal", scope="global")
    await asyncio.gather(*(service.search(agent="main", query="wiki") for _ in range(25)))
    await service.access.flush()
    [point] = await service.store.retrieve([out["id"]])
    assert point.payload["access_count"] == 25
    assert point.payload["last_accessed_at"]


async def test_one_access_flush_sets_each_memory_its_own_count(service: MemoryService) -> None:
    a, b, c = [
        (await service.add(agent="main", content=f"fact {n}", scope="global"))["id"]
        for n in ("alpha", "beta", "gamma")
    ]
    service.access.record([a, a, b, c, c, c])
    await service.access.flush()
    service.access.record([a, b, str(uuid.uuid4())])  # an id no longer stored is dropped
    await service.access.flush()
    points = await service.store.retrieve([a, b, c])
    assert {p.id: p.payload["access_count"] for p in points} == {a: 3, b: 2, c: 3}
    assert service.access.pending == 0


async def test_get_all_pages_with_a_cursor_and_checks_permission(service: MemoryService) -> None:
    for i in range(7):
        await service.add(agent="main", content=f"fact number {i}", scope="global")
    await service.add(
        agent="devops", content="private runbook", scope="agent:ops", mem_type="procedure"
    )
    seen: list[str] = []
    cursor = None
    while True:
        page = await service.get_all(agent="main", scope="global", limit=3, cursor=cursor)
        seen += [r["content"] for r in page["results"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(f"fact number {i}" for i in range(7))
    with pytest.raises(PermissionDenied):
        await service.get_all(agent="stranger")
    with pytest.raises(InvalidInput, match="cursor"):
        await service.get_all(agent="main", cursor="garbage")


async def test_status_counts_only_scopes_the_caller_may_read(store: MemoryStore) -> None:
    config = PermissionConfig(
        agents={
            "admin": AgentPolicy(
                read=["global", "group:*"],
                write=["global", "group:*"],
                operations=[Operation.add, Operation.status],
            ),
            "viewer": AgentPolicy(read=["global"], operations=[Operation.status]),
        }
    )
    svc = make_service(store, config)
    await svc.add(agent="admin", content="public", scope="global")
    await svc.add(agent="admin", content="team only", scope="group:secret-team")
    status = await svc.status(agent="viewer")
    assert status["by_scope"] == {"global": 1}
    assert status["active_memories"] == 1
    assert (await svc.status(agent="admin"))["active_memories"] == 2
    with pytest.raises(PermissionDenied):
        await svc.status(agent="nobody")
    await svc.aclose()


async def test_one_embedder_call_per_add_and_per_search(store: MemoryStore) -> None:
    emb = CountingEmbedder()
    svc = make_service(store, embedder=emb)
    await svc.add(agent="main", content="one call please", scope="global")
    assert emb.calls == 1
    await svc.search(agent="main", query="one call", scope="group:x")
    assert emb.calls == 2
    await svc.aclose()


async def test_search_with_the_embedder_down_is_degraded_not_empty(store: MemoryStore) -> None:
    svc = make_service(store)
    await svc.add(agent="main", content="the zanzibar cluster runs postgres", scope="global")
    down = make_service(store, embedder=DownEmbedder(384))
    out = await down.search(agent="main", query="zanzibar postgres")
    assert out["degraded"] is True
    assert "embedder" in out["reason"]
    assert out["results"][0]["content"] == "the zanzibar cluster runs postgres"
    with pytest.raises(Unavailable):
        await down.add(agent="main", content="cannot embed", scope="global")
    await svc.aclose()
    await down.aclose()


async def test_memory_types_can_be_filtered(service: MemoryService) -> None:
    await service.add(agent="main", content="always use uv", scope="global", mem_type="preference")
    await service.add(agent="main", content="uv is a python tool", scope="global", mem_type="fact")
    out = await service.search(agent="main", query="uv", mem_type="preference")
    assert [r["mem_type"] for r in out["results"]] == [MemType.preference.value]


async def test_get_shows_an_archived_memory_and_hides_an_unknown_id(
    service: MemoryService,
) -> None:
    out = await service.add(agent="main", content="Use pnpm, not npm", scope="global")
    await service.forget(agent="main", memory_id=out["id"], reason="changed our minds")
    got = await service.get(agent="main", memory_id=out["id"])
    assert (got["content"], got["archived"], got["archived_reason"]) == (
        "Use pnpm, not npm",
        True,
        "changed our minds",
    )
    with pytest.raises(NotFound):
        await service.get(agent="main", memory_id=str(uuid.uuid4()))
    with pytest.raises(InvalidInput, match="id"):
        await service.get(agent="main", memory_id="not-an-id")


async def test_a_restore_records_what_it_undid_and_a_repeat_add_of_archived_text_is_new(
    service: MemoryService,
) -> None:
    first = await service.add(agent="main", content="Logs are kept for 30 days", scope="global")
    await service.forget(agent="main", memory_id=first["id"], reason="wrong")
    again = await service.add(agent="main", content="Logs are kept for 30 days", scope="global")
    assert again["status"] == "stored"
    assert again["id"] != first["id"]  # the archived memory stays as it was
    restored = await service.restore(agent="main", memory_id=first["id"])
    assert (restored["undid"]["step"], restored["undid"]["reason"]) == ("forget", "wrong")

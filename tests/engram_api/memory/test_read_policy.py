"""Regression tests for the reads past the policy found by a probe of a live server (issue 15),
on both stores: each case as it was reported, answered now by the rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.memory.access import AccessTracker
from engram_api.memory.guards import SecretGuard
from engram_api.memory.policy import PolicyEngine
from engram_api.memory.queue import DurableQueue
from engram_api.memory.service import MemoryService
from engram_api.settings import LimitSettings
from engram_api.store.base import MemoryStore
from engram_contract.permissions import AgentPolicy, Operation, PermissionConfig, Trust

READ_OPS = [Operation.search, Operation.get_all, Operation.status]
CONFIG = PermissionConfig(
    agents={
        "owner": AgentPolicy(
            read=["global", "dm", "dm:*", "group:*", "agent:*"],
            write=["global", "dm", "dm:*", "group:*", "agent:*"],
            operations=[Operation.add, *READ_OPS, Operation.forget],
            max_trust=Trust.high,
        ),
        # Reads every per-user DM, never the shared bare `dm` bucket.
        "dm-reader": AgentPolicy(read=["dm:*"], operations=READ_OPS),
        # Writes to a team scope it may not read (a reporting bot).
        "writer": AgentPolicy(write=["group:team"], operations=[Operation.add, Operation.status]),
    }
)


@pytest.fixture
async def svc(store: MemoryStore, tmp_path: Path) -> AsyncIterator[MemoryService]:
    service = MemoryService(
        store=store,
        embedder=HashingEmbedder(384),
        policy=PolicyEngine(CONFIG),
        guard=SecretGuard(),
        limits=LimitSettings(),
    )
    yield service
    await service.aclose()


async def _shared_and_personal_dm(svc: MemoryService) -> tuple[str, str]:
    bare = await svc.add(agent="owner", content="the shared inbox moved to Tuesday", scope="dm")
    alice = await svc.add(agent="owner", content="alice prefers short replies", scope="dm:alice")
    return bare["id"], alice["id"]


async def test_a_dm_star_reader_does_not_list_the_bare_dm_bucket_without_a_scope(
    svc: MemoryService,
) -> None:
    bare, alice = await _shared_and_personal_dm(svc)
    for archived in (False, True):
        got = await svc.get_all(agent="dm-reader", include_archived=archived)
        assert [r["id"] for r in got["results"]] == [alice]
        assert got["total"] == 1
    assert bare != alice


async def test_a_dm_star_reader_searching_all_does_not_find_the_bare_dm_bucket(
    svc: MemoryService,
) -> None:
    _, alice = await _shared_and_personal_dm(svc)
    got = await svc.search(agent="dm-reader", query="shared inbox Tuesday", scope="all", limit=50)
    assert [r["id"] for r in got["results"]] == [alice]


async def test_a_dm_star_reader_status_does_not_count_the_bare_dm_bucket(
    svc: MemoryService,
) -> None:
    await _shared_and_personal_dm(svc)
    got = await svc.status(agent="dm-reader")
    assert got["active_memories"] == 1
    assert got["by_scope"] == {"dm:alice": 1}


async def test_a_write_only_agent_learns_nothing_from_adding_an_existing_text(
    svc: MemoryService,
) -> None:
    await svc.add(
        agent="owner",
        content="the release train leaves on Thursdays",
        scope="group:team",
        context="from the private planning thread",
        trust="high",
    )
    dup = await svc.add(
        agent="writer", content="the release train leaves on Thursdays", scope="group:team"
    )
    new = await svc.add(agent="writer", content="the build farm has 12 runners", scope="group:team")
    # Same shape, same status: whether the text was there before is not revealed.
    assert dup.keys() == new.keys() == {"status", "write_id"}
    assert dup["status"] == new["status"] == "stored"
    assert "private planning" not in str(dup)
    assert "owner" not in str(dup)


async def test_status_shows_only_the_callers_queued_writes_and_pending_access_updates(
    svc: MemoryService, tmp_path: Path
) -> None:
    queue = DurableQueue(tmp_path / "queue.sqlite3")
    svc.queue = queue
    # Counts stay pending for this test (no background flush however slow the machine).
    svc.access = AccessTracker(svc.store, svc.clock, delay_s=3600)
    try:
        for n in range(3):
            owner = svc.prepare_add(agent="owner", content=f"owner note {n}", scope="global")
            await queue.enqueue(owner, "store down")
        writer = svc.prepare_add(agent="writer", content="writer note", scope="group:team")
        await queue.enqueue(writer, "store down")
        await svc.add(agent="owner", content="dm note for alice", scope="dm:alice")
        await svc.search(agent="owner", query="dm note alice", scope="dm:alice")

        mine = await svc.status(agent="writer")
        assert mine["queue"]["depth"] == 1
        assert mine["pending_access_updates"] == 0
        theirs = await svc.status(agent="owner")
        assert theirs["queue"]["depth"] == 3
        assert theirs["pending_access_updates"] == 1
    finally:
        await queue.aclose()

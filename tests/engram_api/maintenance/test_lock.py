"""One maintenance run per collection: a second one exits with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from engram_api.maintenance.lock import FileLock, LockHeld, QdrantLock
from engram_api.maintenance.runner import run_maintenance
from engram_api.runtime import Engine
from engram_contract.report import RunResult
from tests.engram_api.maintenance.helpers import add, assert_same_memories, snapshot
from tests.fakes.clock import FakeClock


async def test_a_run_while_another_holds_the_lock_is_skipped_and_changes_nothing(
    engine: Engine,
) -> None:
    await add(engine, "The user prefers dark mode", mem_type="preference")
    await add(engine, "the user prefers dark mode.", mem_type="preference")
    before = await snapshot(engine)
    holder = FileLock(
        engine.settings.data_dir / "locks" / "memories.maintenance.lock", "maintenance run"
    )
    holder.acquire()
    try:
        report = await run_maintenance(engine, "daily", llm=None)
    finally:
        holder.release()
    assert report.result is RunResult.skipped
    assert "another maintenance run on collection 'memories' is running" in report.message
    assert f"pid {__import__('os').getpid()}" in report.message
    assert report.summary().result is RunResult.skipped
    assert_same_memories(await snapshot(engine), before)
    # Released: the next run goes ahead.
    assert (await run_maintenance(engine, "daily", llm=None)).total("merged") == 1


async def test_the_server_lock_admits_one_holder_until_it_expires(tmp_path: Path) -> None:
    client = AsyncQdrantClient(path=str(tmp_path / "qdrant"))
    clock = FakeClock()
    first = QdrantLock(
        client, "memories--maintenance-lock", "maintenance run", ttl_s=60, clock=clock
    )
    second = QdrantLock(
        client, "memories--maintenance-lock", "maintenance run", ttl_s=60, clock=clock
    )
    try:
        await first.acquire()
        with pytest.raises(LockHeld, match="another maintenance run is running"):
            await second.acquire()
        clock.advance(61)  # the first holder stopped renewing: it died
        await second.acquire()
        # The dead holder's late release must not free the new holder's lock.
        await first.release()
        third = QdrantLock(client, "memories--maintenance-lock", "m", ttl_s=60, clock=clock)
        with pytest.raises(LockHeld):
            await third.acquire()
        await second.release()
        await third.acquire()
        await third.release()
        assert not await client.collection_exists("memories--maintenance-lock")
    finally:
        await client.close()

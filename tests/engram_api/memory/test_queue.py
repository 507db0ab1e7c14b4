"""The durable write queue: acknowledged writes survive outages and kill -9, exactly once."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from engram_api.embeddings.base import EmbeddingError, Vector
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.memory.guards import SecretGuard
from engram_api.memory.policy import PolicyEngine
from engram_api.memory.queue import DurableQueue
from engram_api.memory.service import MemoryService
from engram_api.runtime import queued_body_to_write
from engram_api.settings import LimitSettings
from engram_api.store.base import Match, MemoryStore
from engram_api.store.edge import EdgeStore
from engram_api.store.qdrant_server import QdrantServerStore
from engram_contract.permissions import (
    AgentPolicy,
    Operation,
    PermissionConfig,
    builtin_permission_config,
)
from tests.engram_api.memory.test_service import DownEmbedder
from tests.engram_api.server.harness import wait_until
from tests.fakes.clock import FakeClock


def wire(store: MemoryStore, queue: DurableQueue, **kw: object) -> MemoryService:
    svc = MemoryService(
        store=store,
        embedder=kw.get("embedder", HashingEmbedder(384)),  # type: ignore[arg-type]
        policy=PolicyEngine(kw.get("config", builtin_permission_config())),  # type: ignore[arg-type]
        guard=SecretGuard(),
        limits=LimitSettings(),
    )
    svc.queue = queue
    queue.bind(lambda body: queued_body_to_write(svc, body), svc.write)
    return svc


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[DurableQueue]:
    q = DurableQueue(tmp_path / "queue.sqlite3")
    yield q
    await q.aclose()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_write_to_an_unreachable_qdrant_server_is_queued_durably(
    queue: DurableQueue, tmp_path: Path
) -> None:
    dead = QdrantServerStore("memories", url=f"http://127.0.0.1:{free_port()}", timeout_s=2)
    svc = wire(dead, queue)
    out = await svc.add(agent="main", content="remember the milk", scope="global")
    assert out["queued"] is True
    assert out["status"] == "queued"
    # Acknowledged means on disk: a second connection sees it without our process's help.
    rows = sqlite3.connect(tmp_path / "queue.sqlite3").execute("SELECT write_id FROM pending")
    assert [r[0] for r in rows] == [out["write_id"]]
    assert (await queue.stats())["depth"] == 1
    await dead.close()


async def test_queued_writes_replay_in_order_once_the_store_is_back(
    queue: DurableQueue, tmp_path: Path
) -> None:
    store = EdgeStore(tmp_path / "edge")
    svc = wire(store, queue)  # store not opened yet: it is "down"
    acks = [
        await svc.add(agent="main", content=f"step {i} of the runbook", scope="group:ops")
        for i in range(5)
    ]
    assert all(a["queued"] for a in acks)
    await store.open(384)
    stored = await queue.drain()
    assert stored == 5
    points, _ = await store.scroll(Match(), limit=100)
    assert sorted(p.payload["write_id"] for p in points) == sorted(a["write_id"] for a in acks)
    by_write = {p.payload["write_id"]: p.payload["created_at_epoch"] for p in points}
    epochs = [by_write[a["write_id"]] for a in acks]
    assert epochs == sorted(epochs)
    assert await queue.drain() == 0
    assert (await queue.stats())["depth"] == 0
    await store.close()


async def test_writes_queued_while_the_embedder_is_down_are_embedded_on_replay(
    queue: DurableQueue, store: MemoryStore
) -> None:
    down = wire(store, queue, embedder=DownEmbedder(384))
    ack = await down.add(agent="main", content="queued while embedder down", scope="global")
    assert ack["queued"] is True
    wire(store, queue)  # the embedder is back: rebind the queue to a healthy service
    assert await queue.drain() == 1
    [p] = await store.retrieve([ack["id"]])
    assert p.payload["content"] == "queued while embedder down"


async def test_an_entry_that_can_never_succeed_goes_to_dead_letters_and_can_be_retried(
    queue: DurableQueue, store: MemoryStore
) -> None:
    down = wire(store, queue, embedder=DownEmbedder(384))
    ack = await down.add(agent="main", content="written before a permission change", scope="global")
    revoked = PermissionConfig(
        agents={"main": AgentPolicy(read=["global"], operations=[Operation.search])}
    )
    wire(store, queue, config=revoked)
    assert await queue.drain() == 0
    dead = queue.dead_letters()
    assert [d["write_id"] for d in dead] == [ack["write_id"]]
    assert "no longer valid" in dead[0]["reason"]
    assert (await queue.stats())["dead_letters"] == 1
    wire(store, queue)  # permission restored
    assert queue.retry_dead() == 1
    assert await queue.drain() == 1
    assert await store.count(Match()) == 1


async def test_a_failing_entry_is_tried_again_only_when_its_backoff_is_due(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    q = DurableQueue(tmp_path / "q.sqlite3", base_delay_s=1.0, max_delay_s=8.0, clock=clock)
    store = EdgeStore(tmp_path / "edge")  # never opened: always down
    svc = wire(store, q)
    await svc.add(agent="main", content="first while down", scope="global")
    assert (await q.replay_once()) == (0, True)
    [head] = q.entries()
    assert head.attempts == 1
    # More writes and replays before the backoff is over try nothing and count nothing.
    for i in range(50):
        await svc.add(agent="main", content=f"more while down {i}", scope="global")
        await q.replay_once()
    assert [e.attempts for e in q.entries(3)] == [1, 0, 0]
    assert (await q.stats())["next_retry_in_s"] > 0
    clock.advance(1.3)
    await q.replay_once()
    assert q.entries(1)[0].attempts == 2
    assert not q.dead_letters()
    await q.aclose()


async def test_an_outage_dead_letters_nothing_until_the_entry_outlives_max_age(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    q = DurableQueue(tmp_path / "q.sqlite3", max_age_s=3600, max_delay_s=60, clock=clock)
    store = EdgeStore(tmp_path / "edge")  # never opened: always down
    svc = wire(store, q)
    await svc.add(agent="main", content="written during a long outage", scope="global")
    for _ in range(200):  # far more tries than the old 100-attempt limit
        clock.advance(61)
        await q.replay_once()
        if clock.now - 1000.0 > 3500:
            break
    assert not q.dead_letters()
    assert q.entries(1)[0].attempts > 30
    clock.advance(200)
    await q.replay_once()
    [dead] = q.dead_letters()
    assert "expired" in dead["reason"]
    assert "queue.max_age_s=3600" in dead["reason"]
    assert (await q.stats())["depth"] == 0
    await q.aclose()


class SwitchableEmbedder(HashingEmbedder):
    """The hashing embedder behind a switch: an outage the test turns on and off."""

    down = False

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        if self.down:
            raise EmbeddingError("provider timed out")
        return await super().embed_documents(texts)


async def test_a_short_embedder_outage_during_many_writes_loses_and_dead_letters_nothing(
    tmp_path: Path, store: MemoryStore
) -> None:
    q = DurableQueue(tmp_path / "q.sqlite3", base_delay_s=0.05, max_delay_s=0.5)
    embedder = SwitchableEmbedder(384)
    svc = wire(store, q, embedder=embedder)
    q.start()
    acks = []
    for i in range(300):
        # The outage covers writes 100-199; every write kicks the replay loop.
        embedder.down = 100 <= i < 200
        acks.append(await svc.add(agent="main", content=f"event {i} of the deploy", scope="global"))
    embedder.down = False
    assert sum(1 for a in acks if a.get("queued")) == 100
    await wait_until(lambda: not q.entries(1), within=60)
    assert not q.dead_letters()
    assert await store.count(Match()) == 300
    await q.aclose()


def test_replay_killed_with_sigkill_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Enqueue many writes, SIGKILL `engram queue replay` mid-way, rerun, check exactly-once."""
    import asyncio

    data = tmp_path / "data"
    n = 300
    env = {
        **os.environ,
        "ENGRAM_DATA_DIR": str(data),
        "ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER": "hash",
    }

    async def enqueue() -> list[str]:
        q = DurableQueue(data / "queue.sqlite3")
        svc = wire(EdgeStore(data / "unused"), q)
        ids = []
        for i in range(n):
            w = svc.prepare_add(agent="main", content=f"memory {i} {uuid.uuid4()}", scope="global")
            await q.enqueue(w, "test: store down")
            ids.append(w.write_id)
        await q.aclose()
        return ids

    write_ids = asyncio.run(enqueue())
    cmd = [sys.executable, "-m", "engram_api.cli", "queue", "replay"]
    log = (tmp_path / "replay.log").open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
    db = sqlite3.connect(data / "queue.sqlite3")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        (left,) = db.execute("SELECT COUNT(*) FROM pending").fetchone()
        if left < n - 30:
            break
        assert proc.poll() is None, (tmp_path / "replay.log").read_text()
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    log.close()
    (left,) = db.execute("SELECT COUNT(*) FROM pending").fetchone()
    assert 0 < left < n, "the kill must land in the middle of the replay"

    done = subprocess.run(cmd, env=env, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    (left,) = db.execute("SELECT COUNT(*) FROM pending").fetchone()
    assert left == 0
    db.close()

    async def stored_write_ids() -> list[str]:
        store = EdgeStore(data / "qdrant" / "memories")
        await store.open(384)
        out: list[str] = []
        offset = None
        while True:
            page, offset = await store.scroll(Match(archived=None), limit=500, offset=offset)
            out += [p.payload["write_id"] for p in page]
            if offset is None:
                break
        await store.close()
        return out

    stored = asyncio.run(stored_write_ids())
    assert len(stored) == n
    assert sorted(stored) == sorted(write_ids)


async def test_with_both_store_and_embedder_down_writes_queue_and_recover(
    queue: DurableQueue, tmp_path: Path
) -> None:
    store = EdgeStore(tmp_path / "edge")  # not opened: down
    svc = wire(store, queue, embedder=DownEmbedder(384))
    ack = await svc.add(agent="main", content="written during a full outage", scope="global")
    assert ack["queued"] is True
    search = await svc.search(agent="main", query="outage")
    assert search["degraded"] is True
    assert search["results"] == []
    assert "store unavailable" in search["reason"]
    await store.open(384)
    wire(store, queue)  # both back
    assert await queue.drain() == 1
    [p] = await store.retrieve([ack["id"]])
    assert p.payload["content"] == "written during a full outage"
    await store.close()

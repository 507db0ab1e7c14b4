"""The durable write queue: writes that could not be stored yet are never lost.

An entry is acknowledged (``queued: true``) only after SQLite (WAL, ``synchronous=FULL``) has
committed it to disk. Replay runs in arrival order, stores through the same idempotent write
path (point id from write_id), and deletes an entry only after the store confirmed it, so a
kill -9 at any moment leads to at most a repeated, harmless write on restart.

Retries are by time, not by count: a failed replay of the head entry sets its
``next_attempt_at`` with exponential backoff, and nothing (a new write, a kick) tries it again
before then, so an outage of any length costs each entry one attempt per backoff step. Only two
things dead-letter an entry: a permanent refusal (the engine rejects it as it stands) or an age
past ``max_age_s`` (default 24 h) — never a number of attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engram_api.embeddings.base import EmbeddingError
from engram_api.errors import EngramError
from engram_api.store.base import StoreError

from .service import PreparedWrite

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    write_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    enqueued_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    next_attempt_at REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS dead (
    write_id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    reason TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    enqueued_at REAL NOT NULL,
    failed_at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class QueueEntry:
    seq: int
    write_id: str
    body: dict[str, Any]
    enqueued_at: float
    attempts: int
    next_attempt_at: float = 0.0


Prepare = Callable[[dict[str, Any]], PreparedWrite]
Write = Callable[[PreparedWrite], Awaitable[object]]


class DurableQueue:
    def __init__(
        self,
        path: Path,
        *,
        max_age_s: float = 24 * 3600.0,
        base_delay_s: float = 0.5,
        max_delay_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.max_age_s = max_age_s
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._clock = clock
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(pending)").fetchall()}
        if "next_attempt_at" not in columns:  # a queue written by an earlier release
            self._db.execute(
                "ALTER TABLE pending ADD COLUMN next_attempt_at REAL NOT NULL DEFAULT 0"
            )
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._prepare: Prepare | None = None
        self._write: Write | None = None
        self._replay_lock = asyncio.Lock()

    # ------------------------------------------------------------ storage
    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _tx(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    async def enqueue(self, write: PreparedWrite, reason: str) -> None:
        body = json.dumps(write.to_json())
        await asyncio.to_thread(
            self._tx,
            [
                (
                    "INSERT OR IGNORE INTO pending (write_id, body, enqueued_at, last_error) "
                    "VALUES (?, ?, ?, ?)",
                    (write.write_id, body, self._clock(), reason[:500]),
                )
            ],
        )
        log.warning("write queued", extra={"write_id": write.write_id, "reason": reason[:200]})
        self.kick()

    def entries(self, limit: int = 1000) -> list[QueueEntry]:
        rows = self._exec(
            "SELECT seq, write_id, body, enqueued_at, attempts, next_attempt_at FROM pending "
            "ORDER BY seq LIMIT ?",
            (limit,),
        )
        return [QueueEntry(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5]) for r in rows]

    def dead_letters(self) -> list[dict[str, Any]]:
        rows = self._exec(
            "SELECT write_id, body, reason, attempts, enqueued_at, failed_at FROM dead "
            "ORDER BY failed_at"
        )
        out = []
        for write_id, body, reason, attempts, enq, failed in rows:
            b = json.loads(body)
            out.append(
                {
                    "write_id": write_id,
                    "scope": b.get("scope"),
                    "agent": b.get("agent"),
                    "reason": reason,
                    "attempts": attempts,
                    "enqueued_at": _iso(enq),
                    "failed_at": _iso(failed),
                }
            )
        return out

    def retry_dead(self, write_ids: list[str] | None = None) -> int:
        """Move dead letters (all, or the given ids) back to the pending queue."""
        rows = self._exec("SELECT write_id, body, enqueued_at FROM dead")
        chosen = [r for r in rows if write_ids is None or r[0] in write_ids]
        stmts: list[tuple[str, tuple[Any, ...]]] = []
        for write_id, body, enq in chosen:
            stmts.append(
                (
                    "INSERT OR IGNORE INTO pending (write_id, body, enqueued_at) VALUES (?, ?, ?)",
                    (write_id, body, enq),
                )
            )
            stmts.append(("DELETE FROM dead WHERE write_id = ?", (write_id,)))
        if stmts:
            self._tx(stmts)
        return len(chosen)

    async def stats(self, *, agent: str | None = None) -> dict[str, Any]:
        """Depth, oldest age and dead letters: of every agent, or of one agent's writes."""
        where, args = (
            ("", ()) if agent is None else (" WHERE json_extract(body, '$.agent') = ?", (agent,))
        )
        depth, oldest = self._exec("SELECT COUNT(*), MIN(enqueued_at) FROM pending" + where, args)[
            0
        ]
        dead = self._exec("SELECT COUNT(*) FROM dead" + where, args)[0][0]
        head = self.entries(1)
        now = self._clock()
        return {
            "depth": depth,
            "oldest_age_s": round(now - oldest, 1) if oldest else 0.0,
            # Replay is in order, so the head's retry time is the queue's.
            "next_retry_in_s": round(max(0.0, head[0].next_attempt_at - now), 1) if head else 0.0,
            "dead_letters": dead,
        }

    def backoff_s(self, attempts: int) -> float:
        """How long the head entry waits after its ``attempts``-th failed try (jittered)."""
        delay = min(self.max_delay_s, self.base_delay_s * 2.0 ** max(0, attempts - 1))
        return delay * random.uniform(0.8, 1.2)

    # ------------------------------------------------------------- replay
    def bind(self, prepare: Prepare, write: Write) -> None:
        """Connect the queue to the service's prepare and write steps."""
        self._prepare = prepare
        self._write = write

    def kick(self) -> None:
        self._wake.set()

    async def replay_once(self, *, batch: int = 100, force: bool = False) -> tuple[int, bool]:
        """Replay pending entries in order; returns (stored, blocked_by_outage).

        An entry whose retry is not due yet blocks the replay without an attempt (later entries
        never overtake it); ``force`` (an operator's ``engram queue replay``) tries it now.
        """
        if self._prepare is None or self._write is None:
            raise RuntimeError("queue is not bound to a service")
        stored = 0
        async with self._replay_lock:
            for entry in self.entries(batch):
                now = self._clock()
                if now - entry.enqueued_at > self.max_age_s:
                    await asyncio.to_thread(
                        self._to_dead,
                        entry,
                        f"expired: not stored within queue.max_age_s={self.max_age_s:g} s",
                    )
                    continue
                if not force and entry.next_attempt_at > now:
                    return stored, True
                try:
                    prepared = self._prepare(entry.body)
                except EngramError as exc:
                    await asyncio.to_thread(self._to_dead, entry, f"no longer valid: {exc}")
                    continue
                try:
                    await self._write(prepared)
                except (StoreError, EmbeddingError) as exc:
                    if isinstance(exc, EmbeddingError) and not exc.retryable:
                        await asyncio.to_thread(self._to_dead, entry, f"rejected: {exc}")
                        continue
                    attempts = entry.attempts + 1
                    await asyncio.to_thread(
                        self._tx,
                        [
                            (
                                "UPDATE pending SET attempts = ?, last_error = ?, "
                                "next_attempt_at = ? WHERE seq = ?",
                                (
                                    attempts,
                                    str(exc)[:500],
                                    self._clock() + self.backoff_s(attempts),
                                    entry.seq,
                                ),
                            )
                        ],
                    )
                    # Stop here: later entries must not overtake this one.
                    return stored, True
                except EngramError as exc:
                    await asyncio.to_thread(self._to_dead, entry, f"rejected: {exc}")
                    continue
                await asyncio.to_thread(
                    self._tx, [("DELETE FROM pending WHERE seq = ?", (entry.seq,))]
                )
                stored += 1
        return stored, False

    def _to_dead(self, entry: QueueEntry, reason: str) -> None:
        log.error("write moved to dead letters", extra={"write_id": entry.write_id})
        self._tx(
            [
                (
                    "INSERT OR REPLACE INTO dead (write_id, body, reason, attempts, enqueued_at, "
                    "failed_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        entry.write_id,
                        json.dumps(entry.body),
                        reason[:1000],
                        entry.attempts,
                        entry.enqueued_at,
                        self._clock(),
                    ),
                ),
                ("DELETE FROM pending WHERE seq = ?", (entry.seq,)),
            ]
        )

    async def drain(self) -> int:
        """Replay now (due or not) until empty or an outage blocks it; returns how many stored."""
        total = 0
        while self.entries(1):
            stored, blocked = await self.replay_once(force=True)
            total += stored
            if blocked:
                break
        return total

    def _wait_s(self) -> float:
        """Until the head entry is due: nothing to do before then, whatever wakes the loop."""
        head = self.entries(1)
        if not head:
            return self.max_delay_s
        return min(self.max_delay_s, max(0.0, head[0].next_attempt_at - self._clock()))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._wait_s())
            # On Python 3.11, wait_for swallows a cancel that lands as the wake-up completes
            # (a write's kick just before shutdown), so shutdown is also a flag.
            if self._stopping:
                return
            self._wake.clear()
            if not self.entries(1):
                continue
            try:
                # Not forced: a kick from a new write while the head backs off tries nothing.
                await self.replay_once()
            except Exception:
                log.exception("queue replay failed")
                await asyncio.sleep(self.base_delay_s)

    async def aclose(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with self._lock:
            self._db.close()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")

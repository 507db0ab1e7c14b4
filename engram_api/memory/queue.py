"""The durable write queue: writes that could not be stored yet are never lost.

An entry is acknowledged (``queued: true``) only after SQLite (WAL, ``synchronous=FULL``) has
committed it to disk. Replay runs in arrival order, stores through the same idempotent write
path (point id from write_id), and deletes an entry only after the store confirmed it, so a
kill -9 at any moment leads to at most a repeated, harmless write on restart. Entries that
fail for a reason retrying cannot fix go to a dead-letter table, visible in status and
retryable from the CLI.
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
    last_error TEXT NOT NULL DEFAULT ''
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


Prepare = Callable[[dict[str, Any]], PreparedWrite]
Write = Callable[[PreparedWrite], Awaitable[object]]


class DurableQueue:
    def __init__(
        self,
        path: Path,
        *,
        max_attempts: int = 100,
        base_delay_s: float = 0.5,
        max_delay_s: float = 60.0,
    ) -> None:
        self.path = path
        self.max_attempts = max_attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
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
                    (write.write_id, body, time.time(), reason[:500]),
                )
            ],
        )
        log.warning("write queued", extra={"write_id": write.write_id, "reason": reason[:200]})
        self.kick()

    def entries(self, limit: int = 1000) -> list[QueueEntry]:
        rows = self._exec(
            "SELECT seq, write_id, body, enqueued_at, attempts FROM pending ORDER BY seq LIMIT ?",
            (limit,),
        )
        return [QueueEntry(r[0], r[1], json.loads(r[2]), r[3], r[4]) for r in rows]

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
        return {
            "depth": depth,
            "oldest_age_s": round(time.time() - oldest, 1) if oldest else 0.0,
            "dead_letters": dead,
        }

    # ------------------------------------------------------------- replay
    def bind(self, prepare: Prepare, write: Write) -> None:
        """Connect the queue to the service's prepare and write steps."""
        self._prepare = prepare
        self._write = write

    def kick(self) -> None:
        self._wake.set()

    async def replay_once(self, *, batch: int = 100) -> tuple[int, bool]:
        """Replay pending entries in order; returns (stored, blocked_by_outage)."""
        if self._prepare is None or self._write is None:
            raise RuntimeError("queue is not bound to a service")
        stored = 0
        async with self._replay_lock:
            for entry in self.entries(batch):
                try:
                    prepared = self._prepare(entry.body)
                except EngramError as exc:
                    await asyncio.to_thread(self._to_dead, entry, f"no longer valid: {exc}")
                    continue
                try:
                    await self._write(prepared)
                except (StoreError, EmbeddingError) as exc:
                    attempts = entry.attempts + 1
                    if attempts >= self.max_attempts:
                        await asyncio.to_thread(
                            self._to_dead, entry, f"gave up after {attempts} attempts: {exc}"
                        )
                        continue
                    await asyncio.to_thread(
                        self._tx,
                        [
                            (
                                "UPDATE pending SET attempts = ?, last_error = ? WHERE seq = ?",
                                (attempts, str(exc)[:500], entry.seq),
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
                        time.time(),
                    ),
                ),
                ("DELETE FROM pending WHERE seq = ?", (entry.seq,)),
            ]
        )

    async def drain(self) -> int:
        """Replay until the queue is empty or an outage blocks it; returns how many were stored."""
        total = 0
        while self.entries(1):
            stored, blocked = await self.replay_once()
            total += stored
            if blocked:
                break
        return total

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        delay = self.base_delay_s
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            # On Python 3.11, wait_for swallows a cancel that lands as the wake-up completes
            # (a write's kick just before shutdown), so shutdown is also a flag.
            if self._stopping:
                return
            self._wake.clear()
            if not self.entries(1):
                delay = self.max_delay_s
                continue
            try:
                _, blocked = await self.replay_once()
            except Exception:
                log.exception("queue replay failed")
                blocked = True
            if blocked:
                delay = min(self.max_delay_s, max(self.base_delay_s, delay * 2))
                delay *= random.uniform(0.8, 1.2)
            else:
                delay = self.base_delay_s

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

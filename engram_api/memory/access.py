"""Access counting off the answer path.

Searches record the ids they returned; a background flush folds the pending increments into
the store in batches. Increments are summed in memory and flushed under one lock, so within a
process none is lost however many searches run at once. A flush that fails keeps its counts
for the next one.

A flush is one read and one write however many memories it touches: the embedded store runs
every call on one worker, and a write per memory would queue that many jobs ahead of the next
search. Memories that reach the same count share one payload update.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime

from engram_api.store.base import MemoryStore

from .model import rfc3339

log = logging.getLogger(__name__)


class AccessTracker:
    def __init__(
        self, store: MemoryStore, clock: Callable[[], datetime], *, delay_s: float = 1.0
    ) -> None:
        self._store = store
        self._clock = clock
        self._delay_s = delay_s
        self._pending: Counter[str] = Counter()
        # Pending increments by the agent whose search caused them (status shows each its own).
        self._by_agent: Counter[str] = Counter()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def record(self, ids: Iterable[str], *, agent: str = "") -> None:
        chosen = list(ids)
        self._pending.update(chosen)
        if agent:
            self._by_agent[agent] += len(chosen)
        if self._pending and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._flush_later())

    @property
    def pending(self) -> int:
        return sum(self._pending.values())

    def pending_for(self, agent: str) -> int:
        return self._by_agent.get(agent, 0)

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._delay_s)
        await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            batch, self._pending = self._pending, Counter()
            by_agent, self._by_agent = self._by_agent, Counter()
            if not batch:
                return
            try:
                points = await self._store.retrieve(list(batch))
                now = rfc3339(self._clock())
                by_count: dict[int, list[str]] = {}
                for p in points:
                    current = int(p.payload.get("access_count", 0) or 0)
                    by_count.setdefault(current + batch[p.id], []).append(p.id)
                await self._store.set_payloads(
                    [
                        (ids, {"access_count": count, "last_accessed_at": now})
                        for count, ids in sorted(by_count.items())
                    ]
                )
                # Ids that vanished from the store are dropped; nothing to count them on.
                batch.clear()
            except Exception as exc:
                log.warning("access count flush failed; will retry", extra={"error": str(exc)})
                self._pending.update(batch)
                self._by_agent.update(by_agent)

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()

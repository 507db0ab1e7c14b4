"""/readyz: Engram can accept work. The store and the embedder are reported, not required.

Ready means a request sent now is served: the engine is started, a permission config is
active, and the durable queue can take writes. With the store down, adds queue and search says
``degraded``; with every embedder down, adds queue and search is lexical. Neither is a reason
to leave the Service: a replica that drops out during a Qdrant restart cannot queue the writes
the queue exists for. The degraded parts are named in the body and in ``engram_degraded``.

The embedder is probed with a short text at most once per ``readiness_probe_ttl_s`` (remote
providers bill per call); in between, an open circuit breaker on every provider counts as down
straight away.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from typing import Any, Final

from engram_api.embeddings.base import Embedder, EmbeddingError
from engram_api.runtime import Engine
from engram_api.server.reload import PermissionWatcher

PROBE_TEXT: Final = "engram readiness probe"


class EmbedderProbe:
    def __init__(
        self,
        embedder: Embedder,
        *,
        ttl_s: float,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._embedder = embedder
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._clock = clock
        self._last: tuple[float, bool, str] | None = None
        self._lock = asyncio.Lock()

    async def check(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self._embedder.model_id}
        status = getattr(self._embedder, "status", None)
        if callable(status):
            providers = status()
            out["providers"] = [
                {"role": p.role, "model": p.model_id, "breaker": p.breaker} for p in providers
            ]
            if providers and all(p.breaker == "open" for p in providers):
                out.update(ready=False, reason="every embedding provider's breaker is open")
                return out
        async with self._lock:
            now = self._clock()
            if self._last is None or now - self._last[0] >= self._ttl_s:
                ok, reason = await self._probe()
                self._last = (now, ok, reason)
            _, ok, reason = self._last
        out["ready"] = ok
        if reason:
            out["reason"] = reason
        return out

    async def _probe(self) -> tuple[bool, str]:
        try:
            await asyncio.wait_for(self._embedder.embed_query(PROBE_TEXT), self._timeout_s)
        except TimeoutError:
            return False, f"embedder did not answer within {self._timeout_s:g}s"
        except EmbeddingError as exc:
            return False, f"embedder unavailable: {exc}"
        return True, ""


async def readiness(
    engine: Engine | None, probe: EmbedderProbe | None, watcher: PermissionWatcher | None
) -> tuple[bool, dict[str, Any]]:
    if engine is None or probe is None or watcher is None:
        return False, {"ready": False, "reason": "starting", "degraded": []}
    store_ok = await engine.store.healthy()
    embedder = await probe.check()
    perms = watcher.status
    body: dict[str, Any] = {
        "store": {"kind": engine.store.kind, "ready": store_ok},
        "embedder": embedder,
        "permissions": {
            "loaded": True,
            "source": perms.source,
            "digest": perms.digest,
            "applied_at": perms.applied_at,
        },
    }
    if perms.last_error:
        # The last good config still serves; the bad version is reported, not fatal.
        body["permissions"]["rejected_update"] = perms.last_error
    try:
        body["queue"] = await engine.queue.stats()
        queue_ok = True
    except sqlite3.Error as exc:
        # No queue, no place for writes while a part is down: the one thing that is fatal.
        body["queue"] = {"ready": False, "reason": f"durable queue unusable: {exc}"}
        queue_ok = False
    degraded = [
        part
        for part, ok in (("store", store_ok), ("embedder", bool(embedder.get("ready"))))
        if not ok
    ]
    body["degraded"] = degraded
    ready = queue_ok
    body["ready"] = ready
    if not ready:
        body["reason"] = body["queue"]["reason"]
    return ready, body

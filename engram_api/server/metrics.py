"""Prometheus metrics: tool calls, errors and latency, auth, permission reloads, queue depth and
memory counts by scope, type and state.

Each app owns its registry (no process-global state), so several apps can live in one
process (tests, benchmarks). Memory counts come from the store at scrape time, cached for at
least a second (``metrics_cache_s``) so a tight scrape interval cannot turn into a load on the
store. Scope labels are kinds unless names are asked for: a scope name such as ``dm:alice``
says who has memories.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from engram_api.memory.queue import DurableQueue
from engram_api.store.base import Match, MemoryStore, StoreError

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
OTHER_SCOPES: Final = "_other"
_LATENCY_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
_STATES: Final = (("active", False), ("archived", True))


def kind_labels(by_kind: dict[str, int], bare_dm: int) -> dict[str, int]:
    """Counts by scope kind as labels that name no one: ``global``, ``dm`` (the shared bucket),
    ``dm:*``, ``group:*``, ``agent:*``."""
    out: dict[str, int] = {}
    for kind, n in by_kind.items():
        if kind == "global":
            out["global"] = n
        elif kind == "dm":
            out["dm"], out["dm:*"] = bare_dm, n - bare_dm
        else:
            out[f"{kind}:*"] = n
    return {k: v for k, v in out.items() if v > 0}


class Metrics:
    def __init__(
        self,
        *,
        max_scopes: int = 100,
        cache_s: float = 10.0,
        scope_names: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.tool_calls = Counter(
            "engram_tool_calls",
            "MCP tool calls by tool and outcome (ok, queued, or the error kind).",
            ["tool", "outcome"],
            registry=r,
        )
        self.tool_errors = Counter(
            "engram_tool_errors",
            "MCP tool calls that returned an error, by tool and error kind.",
            ["tool", "kind"],
            registry=r,
        )
        self.tool_latency = Histogram(
            "engram_tool_duration_seconds",
            "MCP tool call latency, from arguments validated to answer built.",
            ["tool"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.auth_failures = Counter(
            "engram_auth_failures",
            "HTTP requests refused by authentication, by reason.",
            ["reason"],
            registry=r,
        )
        self.permission_reloads = Counter(
            "engram_permission_reloads",
            "Permission file reloads by result (applied, rejected, unreadable).",
            ["result"],
            registry=r,
        )
        self.permission_last_applied = Gauge(
            "engram_permission_config_last_applied_timestamp_seconds",
            "Unix time the active permission config was applied.",
            registry=r,
        )
        self.queue_depth = Gauge(
            "engram_queue_depth", "Writes waiting in the durable queue.", registry=r
        )
        self.queue_dead = Gauge(
            "engram_queue_dead_letters", "Writes that gave up and wait for an operator.", registry=r
        )
        self.queue_oldest = Gauge(
            "engram_queue_oldest_age_seconds", "Age of the oldest queued write.", registry=r
        )
        self.degraded = Gauge(
            "engram_degraded",
            "1 while a part is down and Engram serves around it (store: writes queue and search "
            "says degraded; embedder: writes queue and search is lexical).",
            ["part"],
            registry=r,
        )
        self.unindexed_points = Gauge(
            "engram_store_unindexed_points",
            "Points the embedded store has not yet put in its HNSW graph (searched by a scan).",
            registry=r,
        )
        self.index_building = Gauge(
            "engram_store_index_build_running",
            "1 while the embedded store builds its HNSW graph in a child process.",
            registry=r,
        )
        self.memories = Gauge(
            "engram_memories", "Memories by state (active, archived).", ["state"], registry=r
        )
        self.memories_by_scope = Gauge(
            "engram_memories_by_scope",
            (
                f"Memories by scope and state; scopes past the first {max_scopes} are summed "
                f"as scope={OTHER_SCOPES!r}."
                if scope_names
                else "Memories by scope kind (global, dm, dm:*, group:*, agent:*) and state."
            ),
            ["scope", "state"],
            registry=r,
        )
        self.memories_by_type = Gauge(
            "engram_memories_by_type",
            "Memories by mem_type and state.",
            ["mem_type", "state"],
            registry=r,
        )
        self.inventory_errors = Counter(
            "engram_metrics_inventory_errors",
            "Scrapes where the store could not be counted (the previous counts stay).",
            registry=r,
        )
        self._max_scopes = max_scopes
        self._scope_names = scope_names
        self._cache_s = cache_s
        self._clock = clock
        self._last_inventory: float | None = None
        self._lock = asyncio.Lock()

    def observe_call(self, tool: str, outcome: str, seconds: float, *, error: bool) -> None:
        self.tool_calls.labels(tool=tool, outcome=outcome).inc()
        self.tool_latency.labels(tool=tool).observe(seconds)
        if error:
            self.tool_errors.labels(tool=tool, kind=outcome).inc()

    async def refresh(self, store: MemoryStore, queue: DurableQueue) -> None:
        stats = await queue.stats()
        self.queue_depth.set(stats["depth"])
        self.queue_dead.set(stats["dead_letters"])
        self.queue_oldest.set(stats["oldest_age_s"])
        index = store.index_status()
        if index is not None:
            self.unindexed_points.set(index.unindexed_points)
            self.index_building.set(int(index.building))
        async with self._lock:
            now = self._clock()
            if self._last_inventory is not None and now - self._last_inventory < self._cache_s:
                return
            try:
                await self._inventory(store)
            except StoreError:
                self.inventory_errors.inc()
                return
            self._last_inventory = now

    async def _inventory(self, store: MemoryStore) -> None:
        # Gather everything first so a store error leaves the previous counts intact.
        counts: list[tuple[str, int, dict[str, int], dict[str, int]]] = []
        for state, archived in _STATES:
            match = Match(archived=archived)
            total = await store.count(match)
            if self._scope_names:
                scopes = await store.facet("scope", match, limit=self._max_scopes)
            else:
                bare = await store.count(Match(scopes=frozenset({"dm"}), archived=archived))
                scopes = kind_labels(await store.facet("scope_kind", match), bare)
            types = await store.facet("mem_type", match)
            counts.append((state, total, scopes, types))
        self.memories_by_scope.clear()
        self.memories_by_type.clear()
        for state, total, scopes, types in counts:
            self.memories.labels(state=state).set(total)
            for scope, n in scopes.items():
                self.memories_by_scope.labels(scope=scope, state=state).set(n)
            rest = total - sum(scopes.values())
            if rest > 0:
                self.memories_by_scope.labels(scope=OTHER_SCOPES, state=state).set(rest)
            for mem_type, n in types.items():
                self.memories_by_type.labels(mem_type=mem_type, state=state).set(n)

    def observe_degraded(self, degraded: list[str]) -> None:
        for part in ("store", "embedder"):
            self.degraded.labels(part=part).set(int(part in degraded))

    def render(self) -> bytes:
        return generate_latest(self.registry)

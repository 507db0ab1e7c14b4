"""Similar pairs from the stored vectors: batched neighbour queries inside one scope and type.

Nothing is re-embedded and nothing is compared all-pairs: each group (one scope, one type) is
scrolled a page at a time with its vectors, and each page becomes one batched nearest-neighbour
query restricted to the same group and to active memories. Work grows with
``memories x neighbours``; the store's index answers each query.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engram_api.store.base import Match, MemoryStore
from engram_contract.permissions import MemType

from .context import RunContext

_FACET_LIMIT = 1_000_000


@dataclass(frozen=True)
class Group:
    scope: str
    mem_type: MemType
    count: int

    def match(self, **kw: Any) -> Match:
        return Match(
            scopes=frozenset({self.scope}), mem_types=frozenset({self.mem_type.value}), **kw
        )


@dataclass
class PairScan:
    # (smaller id, larger id) -> cosine similarity
    pairs: dict[tuple[str, str], float] = field(default_factory=dict)
    # Payload of every memory that is part of a pair.
    payloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    scanned: int = 0

    def adjacency(self) -> dict[str, set[str]]:
        adj: dict[str, set[str]] = {}
        for a, b in self.pairs:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)
        return adj


async def groups(
    store: MemoryStore, types: Iterable[MemType], *, min_size: int = 2, **match: Any
) -> list[Group]:
    """Active (scope, type) groups with at least ``min_size`` memories: one facet per type."""
    out: list[Group] = []
    for t in sorted(set(types), key=lambda x: x.value):
        counts = await store.facet(
            "scope", Match(mem_types=frozenset({t.value}), **match), limit=_FACET_LIMIT
        )
        out.extend(Group(s, t, n) for s, n in sorted(counts.items()) if n >= min_size)
    return out


async def similar_pairs(
    ctx: RunContext,
    group: Group,
    *,
    low: float,
    high: float | None = None,
    neighbours: int,
    step: str,
    done_before: int = 0,
    total: int | None = None,
    **match: Any,
) -> PairScan:
    """Pairs of active memories in ``group`` with ``low <= similarity < high``.

    Memories archived earlier in this run (``ctx.archived``) are skipped even in a dry run,
    where the store still has them active.
    """
    scan = PairScan()
    m = group.match(**match)
    offset: str | None = None
    while True:
        page, offset = await ctx.store.scroll(
            m, limit=ctx.settings.page_size, offset=offset, with_vectors=True
        )
        live = [p for p in page if p.dense is not None and p.id not in ctx.archived]
        if live:
            hits = await ctx.store.query_batch(
                [p.dense for p in live if p.dense is not None],
                match=m,
                # One more than asked: a memory finds itself first.
                limit=neighbours + 1,
                score_threshold=low,
            )
            for p, found in zip(live, hits, strict=True):
                for h in found:
                    if h.id == p.id or h.id in ctx.archived:
                        continue
                    if high is not None and h.score >= high:
                        continue
                    key = (p.id, h.id) if p.id < h.id else (h.id, p.id)
                    scan.pairs[key] = max(scan.pairs.get(key, 0.0), min(h.score, 1.0))
                    scan.payloads.setdefault(p.id, p.payload)
                    scan.payloads.setdefault(h.id, h.payload)
        scan.scanned += len(page)
        ctx.progress(step, done_before + scan.scanned, total)
        if offset is None:
            return scan

"""Similar pairs from the stored vectors: batched neighbour queries inside one scope and type.

Nothing is re-embedded and nothing is compared all-pairs: each group (one scope, one type) is
scrolled a page at a time with its vectors, and each page becomes one batched nearest-neighbour
query restricted to the same group and to active memories. Hits come back as ids and scores
only; the payloads of pair members are taken from the scrolled pages (converting every hit's
payload used to cost more than the search itself).

Cost: one scroll page and one batch per ``page_size`` memories. The embedded store searches
exactly, so each query costs O(size of its group): a run is linear in the number of memories
while groups stay bounded (many scopes), and grows as memories x group size inside one very
large scope (see docs/maintenance.md, "Figures").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
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


async def scan_groups(
    ctx: RunContext,
    types: Iterable[MemType],
    *,
    low: float,
    high: float | None = None,
    neighbours: int,
    step: str,
    min_size: int = 2,
    **match: Any,
) -> AsyncIterator[tuple[Group, PairScan]]:
    """:func:`similar_pairs` over every qualifying (scope, type) group, with one progress
    count across all of them."""
    found = await groups(ctx.store, types, min_size=min_size, **match)
    total = sum(g.count for g in found)
    done = 0
    for g in found:
        scan = await similar_pairs(
            ctx,
            g,
            low=low,
            high=high,
            neighbours=neighbours,
            step=step,
            done_before=done,
            total=total,
            **match,
        )
        done += scan.scanned
        yield g, scan


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
    # Hits come back without payloads (converting every hit's payload cost more than the
    # search); a pair's payloads are taken from the scrolled pages instead. A hit on a page
    # not scrolled yet is picked up there; one on an earlier page is read at the end.
    wanted: set[str] = set()
    offset: str | None = None
    while True:
        page, offset = await ctx.store.scroll(
            m, limit=ctx.settings.page_size, offset=offset, with_vectors=True
        )
        on_page = {p.id: p.payload for p in page}
        for pid in wanted & on_page.keys():
            scan.payloads.setdefault(pid, on_page[pid])
        wanted -= on_page.keys()
        live = [p for p in page if p.dense is not None and p.id not in ctx.archived]
        if live:
            hits = await ctx.store.query_batch(
                [p.dense for p in live if p.dense is not None],
                match=m,
                # One more than asked: a memory finds itself first.
                limit=neighbours + 1,
                score_threshold=low,
                with_payload=False,
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
                    if h.id in on_page:
                        scan.payloads.setdefault(h.id, on_page[h.id])
                    elif h.id not in scan.payloads:
                        wanted.add(h.id)
        scan.scanned += len(page)
        ctx.progress(step, done_before + scan.scanned, total)
        if offset is None:
            await _fill_payloads(ctx, scan, wanted - scan.payloads.keys())
            return scan


async def _fill_payloads(ctx: RunContext, scan: PairScan, missing: set[str]) -> None:
    """Payloads of pair members found on earlier pages; pairs whose member is gone (deleted
    meanwhile) or was archived meanwhile are dropped."""
    if not missing:
        return
    for p in await ctx.store.retrieve(sorted(missing)):
        if not p.payload.get("archived"):
            scan.payloads[p.id] = p.payload
    for key in [k for k in scan.pairs if k[0] not in scan.payloads or k[1] not in scan.payloads]:
        del scan.pairs[key]

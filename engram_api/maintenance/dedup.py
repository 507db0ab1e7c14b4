"""Dedup: the same memory stored twice in one scope and type becomes one.

Candidates are active memories of every type but task_log (two logs of the same routine are
two events), found by their stored vectors at or above the profile's related cosine. A pair
is merged only when :func:`sameness.judge` says ``duplicate``: close *and* agreeing on
numbers, versions, dates, negation, antonyms and entities. Close pairs that disagree are left
to the conflicts step (counted here as ``conflict_candidates``), and pairs a person restored
apart are skipped (``skipped_restored``).
"""

from __future__ import annotations

from engram_api.memory.undo import kept_apart
from engram_api.store.base import StoreError
from engram_contract.permissions import MemType

from .context import RunContext
from .merge import merge, star_clusters
from .neighbours import PairScan, scan_groups
from .report import StepReport
from .sameness import judge

STEP = "dedup"
# Merges are written in batches: a write per merge costs a disk flush each.
_FLUSH_AT = 512


async def _flush(ctx: RunContext, step: StepReport) -> None:
    try:
        await ctx.flush()
    except StoreError as exc:
        step.error(f"writing merges failed: {exc}")


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def dedup_types(ctx: RunContext) -> list[MemType]:
    excluded = {*ctx.settings.dedup.exclude_types, MemType.task_log}
    return [t for t in MemType if t not in excluded]


def dedup_threshold(ctx: RunContext) -> float:
    return ctx.settings.dedup.threshold or ctx.profile.dedup


def scan_floor(ctx: RunContext) -> float:
    """The lowest cosine a duplicate can have: surface variants may sit below dedup."""
    threshold = dedup_threshold(ctx)
    return min(threshold, ctx.profile.related) if ctx.profile.verbatim < 1.0 else threshold


def duplicates_only(ctx: RunContext, step: StepReport, scan: PairScan) -> PairScan:
    """The pairs of ``scan`` that are the same memory (the others counted and left)."""
    threshold = dedup_threshold(ctx)
    out = PairScan(payloads=scan.payloads, scanned=scan.scanned)
    for (a, b), score in scan.pairs.items():
        pa, pb = scan.payloads[a], scan.payloads[b]
        j = judge(
            score,
            str(pa.get("content", "")),
            str(pb.get("content", "")),
            ctx.profile,
            dedup=threshold,
        )
        if j.kind == "conflict" and score >= threshold:
            step.count("conflict_candidates")
        if j.kind != "duplicate":
            continue
        why = kept_apart((a, pa), (b, pb))
        if why:
            step.count("skipped_restored")
            step.act(
                "skipped",
                a,
                pa.get("content"),
                other=b,
                other_text=pb.get("content"),
                reason=f"not merged again: {why}",
            )
            continue
        out.pairs[(a, b)] = score
    return out


async def run_dedup(ctx: RunContext, step: StepReport) -> None:
    cfg = ctx.settings.dedup
    threshold = dedup_threshold(ctx)
    low = scan_floor(ctx)
    step.params.update(
        threshold=threshold,
        scan_from=low,
        lexical=ctx.profile.lexical,
        verbatim=ctx.profile.verbatim,
        neighbours=cfg.neighbours,
    )
    done = 0
    async for _, found in scan_groups(
        ctx, dedup_types(ctx), low=low, neighbours=cfg.neighbours, step=STEP, archived=False
    ):
        done += found.scanned
        step.count("groups")
        step.count("pairs", len(found.pairs))
        scan = duplicates_only(ctx, step, found)
        for survivor, losers in star_clusters(scan):
            step.count("clusters")
            merge(ctx, step, survivor, losers, scan.payloads)
            sp = scan.payloads[survivor]
            for lid in losers:
                step.act(
                    "merged",
                    lid,
                    scan.payloads[lid].get("content"),
                    survivor=survivor,
                    survivor_text=sp.get("content"),
                    reason=f"duplicate (cosine {scan.pairs[_key(lid, survivor)]:.3f})",
                )
        if len(ctx.pending) >= _FLUSH_AT:
            await _flush(ctx, step)
    await _flush(ctx, step)
    step.count("scanned", done)

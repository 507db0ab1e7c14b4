"""Dedup: near-identical memories of one scope and type become one.

Candidates are active memories of every type but task_log (two logs of the same routine are
two events); the threshold comes from the embedding model's calibrated profile unless set.
"""

from __future__ import annotations

from engram_api.store.base import StoreError
from engram_contract.permissions import MemType

from .context import RunContext
from .merge import merge, star_clusters
from .neighbours import scan_groups
from .report import StepReport

STEP = "dedup"
# Merges are written in batches: a write per merge costs a disk flush each.
_FLUSH_AT = 512


async def _flush(ctx: RunContext, step: StepReport) -> None:
    try:
        await ctx.flush()
    except StoreError as exc:
        step.error(f"writing merges failed: {exc}")


def dedup_types(ctx: RunContext) -> list[MemType]:
    excluded = {*ctx.settings.dedup.exclude_types, MemType.task_log}
    return [t for t in MemType if t not in excluded]


def dedup_threshold(ctx: RunContext) -> float:
    return ctx.settings.dedup.threshold or ctx.profile.dedup


async def run_dedup(ctx: RunContext, step: StepReport) -> None:
    cfg = ctx.settings.dedup
    threshold = dedup_threshold(ctx)
    step.params.update(threshold=threshold, neighbours=cfg.neighbours)
    done = 0
    async for _, scan in scan_groups(
        ctx, dedup_types(ctx), low=threshold, neighbours=cfg.neighbours, step=STEP, archived=False
    ):
        done += scan.scanned
        step.count("groups")
        step.count("pairs", len(scan.pairs))
        for survivor, losers in star_clusters(scan):
            step.count("clusters")
            merge(ctx, step, survivor, losers, scan.payloads)
        if len(ctx.pending) >= _FLUSH_AT:
            await _flush(ctx, step)
    await _flush(ctx, step)
    step.count("scanned", done)

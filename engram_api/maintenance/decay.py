"""Decay: memories of types with a half-life fade with age, slower the more they are used.

``effective_age = age_days / (1 + min(ln(1 + access_count), cap))``,
``importance = exp(-ln 2 / half_life * effective_age)``; below the threshold the memory is
archived with reason ``decay``. Importance only falls below the threshold after
``half_life * log2(1 / threshold)`` days even with no accesses, so only memories older than
that are read at all.

Decay never archives a task log that belongs to a consolidation cluster without a knowledge
memory covering it: consolidation archives consolidated logs itself, and marks the members of
clusters it could not consolidate this run as protected; when consolidation did not run
(disabled), decay finds the clusters itself. A memory restored from decay is not decayed again.
"""

from __future__ import annotations

import math

from engram_api.memory.undo import restored_from
from engram_api.store.base import Match
from engram_contract.permissions import MemType

from .consolidation import find_clusters
from .context import RunContext
from .report import ARCHIVED, StepReport

STEP = "decay"
REASON = "decay"
_DAY_S = 86_400.0


def importance(age_days: float, access_count: int, half_life_days: float, cap: float) -> float:
    divisor = 1.0 + min(math.log1p(max(access_count, 0)), cap)
    effective_age = max(age_days, 0.0) / divisor
    return math.exp(-math.log(2) / half_life_days * effective_age)


async def run_decay(ctx: RunContext, step: StepReport) -> None:
    cfg = ctx.settings.decay
    step.params.update(
        threshold=cfg.threshold,
        access_cap=cfg.access_cap,
        half_life_days={t.value: d for t, d in cfg.half_life_days.items()},
    )
    if MemType.task_log in cfg.half_life_days and not ctx.consolidation_checked:
        for members, _ in await find_clusters(ctx, StepReport("clusters")):
            ctx.protected.update(members)
    for mem_type, half_life in sorted(cfg.half_life_days.items(), key=lambda kv: kv[0].value):
        await _decay_type(ctx, step, mem_type, half_life)


async def _decay_type(
    ctx: RunContext, step: StepReport, mem_type: MemType, half_life: float
) -> None:
    cfg = ctx.settings.decay
    youngest_fading = half_life * math.log2(1.0 / cfg.threshold)
    match = Match(
        mem_types=frozenset({mem_type.value}),
        archived=False,
        created_before_epoch=ctx.now_epoch - youngest_fading * _DAY_S,
    )
    label = f"{STEP} {mem_type.value}"
    total = await ctx.store.count(match)
    offset: str | None = None
    seen = 0
    while True:
        page, offset = await ctx.store.scroll(match, limit=ctx.settings.page_size, offset=offset)
        fading: list[str] = []
        for p in page:
            if p.id in ctx.archived:
                continue
            if p.id in ctx.protected:
                step.count("spared_for_consolidation")
                continue
            undone = restored_from(p.payload, STEP)
            if undone:
                step.count("skipped_restored")
                step.act(
                    "skipped",
                    p.id,
                    p.payload.get("content"),
                    reason=f"restored by {undone.get('restored_by', '?')} "
                    f"at {undone.get('restored_at', '?')}; not decayed again",
                )
                continue
            age = (ctx.now_epoch - float(p.payload.get("created_at_epoch", ctx.now_epoch))) / _DAY_S
            score = importance(
                age, int(p.payload.get("access_count", 0) or 0), half_life, cfg.access_cap
            )
            if score < cfg.threshold:
                fading.append(p.id)
                step.act(
                    "decayed",
                    p.id,
                    p.payload.get("content"),
                    reason=f"importance {score:.3f} < {cfg.threshold} "
                    f"({age:.0f} days, {p.payload.get('access_count', 0)} accesses)",
                )
        # Archiving changes no field the filter reads until the page is done: the cursor
        # (point ids in order) stays valid.
        await ctx.archive(fading, REASON)
        step.count(ARCHIVED, len(fading))
        step.count(f"archived_{mem_type.value}", len(fading))
        step.add_ids("archived", fading)
        seen += len(page)
        step.count("scanned", len(page))
        ctx.progress(label, seen, total)
        if offset is None:
            return

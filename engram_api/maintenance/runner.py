"""One maintenance run: lock, steps in order, report.

daily:  re-extraction (LLM), dedup.
weekly: daily + conflicts (LLM) + consolidation (LLM) + decay.

Steps run one after another; a step that fails (the store went away) is reported as failed
and the next ones still run, since each reads the store afresh. LLM steps without an LLM, or
after the token budget is spent, are reported as skipped with the reason (they still report
their candidates, so a run without an LLM shows what one would do). A dry run computes
everything and writes nothing but its report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from engram_api.errors import EngramError
from engram_api.llm.base import LLM, LLMConfigError, TokenUsage
from engram_api.llm.budget import BudgetedLLM
from engram_api.llm.config import LLMSettings
from engram_api.llm.factory import NO_LLM_REASON, build_llm, for_run
from engram_api.memory.model import rfc3339
from engram_api.runtime import Engine
from engram_api.settings import EngramSettings
from engram_api.store.base import StoreError
from engram_contract.report import RunResult, Task

from .conflicts import run_conflicts
from .consolidation import run_consolidation
from .context import RunContext
from .decay import run_decay
from .dedup import run_dedup
from .lock import LockHeld, run_lock
from .progress import Progress, no_progress
from .reextract import run_reextract
from .report import MaintenanceReport, StepReport, save_report

log = logging.getLogger(__name__)

StepFn = Callable[[RunContext, StepReport], Awaitable[None]]
_DEFAULT: Final = object()

STEPS: Final[dict[Task, tuple[tuple[str, StepFn, bool], ...]]] = {
    # (name, function, uses the LLM)
    Task.daily: (
        ("reextract", run_reextract, True),
        ("dedup", run_dedup, False),
    ),
    Task.weekly: (
        ("reextract", run_reextract, True),
        ("dedup", run_dedup, False),
        ("conflicts", run_conflicts, True),
        ("consolidation", run_consolidation, True),
        ("decay", run_decay, False),
    ),
}


def _enabled(ctx: RunContext, name: str) -> bool:
    section = getattr(ctx.settings, name, None)
    return bool(getattr(section, "enabled", True))


def _usage(llm: BudgetedLLM | None) -> TokenUsage:
    return llm.budget.usage if llm is not None else TokenUsage()


def _tokens(u: TokenUsage) -> dict[str, int]:
    return {"input": u.input_tokens, "output": u.output_tokens, "total": u.total}


async def run_maintenance(
    engine: Engine,
    task: Task | str,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    llm: LLM | object | None = _DEFAULT,
) -> MaintenanceReport:
    """Run ``task`` (daily or weekly) on the engine's collection and save the report.

    ``llm`` defaults to the chain configured in ``engine.settings.llm`` with a fresh budget of
    ``llm.run_token_budget``; pass None for no LLM, or a ``BudgetedLLM`` to set the budget.
    A run that finds another one holding the lock returns a ``Skipped`` report.
    """
    task = Task(task)
    if task not in STEPS:
        raise EngramError(f"task: maintenance runs daily or weekly, not {task.value}")
    settings = engine.settings
    mcfg = settings.maintenance
    clock = engine.service.clock
    now = clock()
    report = MaintenanceReport(
        task=task,
        dry_run=dry_run,
        collection=settings.store.collection,
        store_kind=engine.store.kind,
        started_at=rfc3339(now),
        embedding_model=engine.embedder.model_id,
    )
    profile = mcfg.profile_for(engine.embedder.model_id)
    report.similarity = {
        "profile": profile.model_dump(),
        "dedup_threshold": mcfg.dedup.threshold or profile.dedup,
    }
    started = time.monotonic()
    try:
        async with run_lock(
            engine.store,
            settings.data_dir,
            settings.store.collection,
            "maintenance",
            ttl_s=mcfg.lock_ttl_s,
        ):
            owned, chain, reason = _build_llm(engine, llm)
            budgeted: BudgetedLLM | None = None
            if isinstance(chain, BudgetedLLM):
                budgeted = chain  # the caller chose the budget
            elif chain is not None:
                budgeted = for_run(chain, llm_settings(settings))
            ctx = RunContext(
                engine=engine,
                settings=mcfg,
                report=report,
                now=now,
                profile=profile,
                dry_run=dry_run,
                progress=progress or no_progress,
                llm=budgeted,
                no_llm_reason=reason,
            )
            try:
                await _run_steps(ctx, task)
            finally:
                if owned and chain is not None:
                    await chain.aclose()
            report.llm = {
                "model": chain.model_id if chain is not None else None,
                "budget": budgeted.budget.limit if budgeted is not None else 0,
                "tokens": _tokens(_usage(budgeted)),
                "calls": budgeted.budget.calls if budgeted is not None else 0,
            }
            if ctx.budget_reason:
                report.llm["stopped"] = ctx.budget_reason
            if not (chain is not None and not dry_run):
                report.llm["not_used"] = "dry run" if chain is not None else reason
    except LockHeld as exc:
        report.result = RunResult.skipped
        report.message = str(exc)
    report.finished_at = rfc3339(clock())
    report.elapsed_s = time.monotonic() - started
    if report.result is not RunResult.skipped:
        failed = [s.name for s in report.steps if s.status == "failed"]
        report.result = RunResult.failed if failed else RunResult.succeeded
        report.message = _message(report, failed)
    save_report(settings.data_dir, report, keep=mcfg.reports_keep)
    return report


def llm_settings(settings: EngramSettings) -> LLMSettings:
    return settings.llm


def _build_llm(engine: Engine, llm: LLM | object | None) -> tuple[bool, LLM | None, str]:
    """(we own it, the LLM or None, why there is none)."""
    if llm is not _DEFAULT:
        return False, llm if isinstance(llm, LLM) else None, "no LLM given to this run"
    try:
        chain = build_llm(llm_settings(engine.settings))
    except LLMConfigError as exc:
        return False, None, f"LLM not usable: {exc}"
    return True, chain, NO_LLM_REASON if chain is None else ""


async def _run_steps(ctx: RunContext, task: Task) -> None:
    for name, fn, uses_llm in STEPS[task]:
        step = ctx.report.step(name)
        if not _enabled(ctx, name):
            step.skip(f"disabled (maintenance.{name}.enabled=false)")
            continue
        before = _usage(ctx.llm)
        started = time.monotonic()
        try:
            try:
                await fn(ctx, step)
            finally:
                await ctx.flush()
        except (StoreError, EngramError) as exc:
            step.status = "failed"
            step.error(f"{name} failed: {exc}")
            log.error("maintenance step %s failed: %s", name, exc)
        step.elapsed_s = time.monotonic() - started
        if uses_llm:
            used = _usage(ctx.llm)
            step.tokens = _tokens(
                TokenUsage(
                    used.input_tokens - before.input_tokens,
                    used.output_tokens - before.output_tokens,
                )
            )


def _message(report: MaintenanceReport, failed: list[str]) -> str:
    parts = []
    if failed:
        parts.append("failed steps: " + ", ".join(failed))
    skipped = [f"{s.name} ({s.reason})" for s in report.steps if s.status in ("skipped", "stopped")]
    if skipped:
        parts.append("skipped: " + "; ".join(skipped))
    if report.dry_run:
        parts.append("dry run: nothing was changed")
    return ". ".join(parts)[:1024]

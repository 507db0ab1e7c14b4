"""Maintenance commands: ``maintenance daily|weekly|calibrate|reports``, ``backup``, ``restore``,
``export``, ``import``.

With ``--summary-line`` the compact summary (``ENGRAM_SUMMARY {json}``) is the last line on
stdout and is also written to the termination-message file (env
``ENGRAM_TERMINATION_MESSAGE_PATH``, else ``/dev/termination-log`` when it is writable), where
the operator reads it from the finished Job. A run that cannot even start still writes a
``Failed`` summary saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from engram_api.cli.owner import run_here_or_in_owner
from engram_api.errors import EngramError
from engram_api.maintenance.progress import TerminalProgress
from engram_api.maintenance.report import MaintenanceReport, latest_reports
from engram_api.memory.model import rfc3339, utc_now
from engram_api.runtime import Engine, open_engine
from engram_api.settings import EngramSettings
from engram_contract.report import MaintenanceSummary, RunResult, Task, parse_summary

TERMINATION_ENV = "ENGRAM_TERMINATION_MESSAGE_PATH"
DEFAULT_TERMINATION_PATH = Path("/dev/termination-log")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = sub.add_parser("maintenance", help="dedup, conflicts, consolidation, decay; reports")
    m.add_argument(
        "task",
        choices=["daily", "weekly", "calibrate", "reports"],
        help="daily|weekly: run maintenance; calibrate: measure similarity thresholds for the "
        "configured embedder; reports: show the latest run reports",
    )
    m.add_argument(
        "--dry-run", action="store_true", help="report what would change, change nothing"
    )
    m.add_argument("--summary-line", action="store_true", help="print the compact summary last")
    m.add_argument("--limit", type=int, default=5, help="reports: how many (default 5)")
    m.add_argument(
        "--corpus",
        type=Path,
        help="calibrate: fit every threshold on a labelled pair corpus "
        "(e.g. tests/corpora/lifecycle.yaml) instead of the shipped sentence pairs",
    )
    m.set_defaults(func=_maintenance)

    b = sub.add_parser("backup", help="snapshot (server) or portable export (embedded), keep N")
    b.add_argument("--summary-line", action="store_true", help="print the compact summary last")
    b.set_defaults(func=_backup)

    r = sub.add_parser("restore", help="restore a backup (snapshot file or export directory)")
    r.add_argument("path", type=Path)
    r.add_argument("--collection", help="restore into this collection (default: the configured)")
    r.add_argument("--force", action="store_true", help="replace the memories it already holds")
    r.set_defaults(func=_restore)

    e = sub.add_parser("export", help="write a portable export (JSONL + manifest) to a new dir")
    e.add_argument("path", type=Path)
    e.set_defaults(func=_export)

    i = sub.add_parser("import", help="merge a portable export into the collection")
    i.add_argument("path", type=Path)
    i.set_defaults(func=_import)


# ------------------------------------------------------------------ summary line
def termination_path() -> Path | None:
    configured = os.environ.get(TERMINATION_ENV)
    if configured:
        return Path(configured)
    p = DEFAULT_TERMINATION_PATH
    if p.exists() and os.access(p, os.W_OK):
        return p
    return None


def emit_summary(summary: MaintenanceSummary) -> None:
    line = summary.to_line()
    path = termination_path()
    if path is not None:
        try:
            path.write_text(line + "\n", encoding="utf-8")
        except OSError as exc:
            print(f"engram: cannot write the termination message to {path}: {exc}", file=sys.stderr)
    sys.stdout.flush()
    print(line, flush=True)


def _failed_summary(task: Task, message: str) -> MaintenanceSummary:
    now = rfc3339(utc_now())
    return MaintenanceSummary(
        task=task,
        result=RunResult.failed,
        started_at=now,
        finished_at=now,
        elapsed_s=0.0,
        errors=1,
        message=message[:1024],
    )


# ------------------------------------------------------------------ rendering
ACTIONS_SHOWN = 20


def action_line(a: dict[str, Any]) -> str:
    """``merged "text" -> survivor "text" (reason)``: one action on one line."""
    out = f'{a.get("action")} {a.get("id")} "{a.get("text", "")}"'
    other = a.get("survivor") or a.get("other")
    if other:
        arrow = "->" if a.get("survivor") else "vs"
        text = a.get("survivor_text") or a.get("other_text") or ""
        out += f' {arrow} {other} "{text}"'
    if a.get("reason"):
        out += f" ({a['reason']})"
    return out


def render_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report['task']} on '{report['collection']}' ({report['store']}): {report['result']}"
        + (" [dry run]" if report.get("dry_run") else "")
        + f" in {report['elapsed_s']:.1f}s"
    ]
    for s in report.get("steps", []):
        counts = " ".join(f"{k}={v}" for k, v in s.get("counts", {}).items())
        extra = f" ({s['reason']})" if s.get("reason") else ""
        errors = f" errors={len(s['errors'])}" if s.get("errors") else ""
        lines.append(
            f"  {s['name']:<14} {s['status']:<8} {s['elapsed_s']:>7.2f}s  {counts}{errors}{extra}"
        )
        for err in s.get("errors", [])[:5]:
            lines.append(f"      ! {err}")
        lines.extend(f"      {action_line(x)}" for x in s.get("actions", [])[:ACTIONS_SHOWN])
        hidden = len(s.get("actions", [])) - ACTIONS_SHOWN + s.get("actions_dropped", 0)
        if hidden > 0:
            lines.append(f"      … {hidden} more actions in the JSON report (--json)")
    tokens = (report.get("llm") or {}).get("tokens")
    if tokens:
        lines.append(
            f"  LLM tokens: {tokens.get('total', 0)} (budget {report['llm'].get('budget')})"
        )
    if report.get("message"):
        lines.append(f"  {report['message']}")
    return "\n".join(lines)


def _finish(data: dict[str, Any], summary_line: str, args: argparse.Namespace) -> int:
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else render_report(data))
    if data.get("result") == RunResult.skipped.value and data.get("message"):
        print(f"engram: {data['message']}", file=sys.stderr)
    if getattr(args, "summary_line", False):
        emit_summary(parse_summary(summary_line))
    return 1 if data.get("result") == RunResult.failed.value else 0


def _with_engine(
    settings: EngramSettings,
    args: argparse.Namespace,
    task: Task,
    work: Callable[[Engine, TerminalProgress], Awaitable[MaintenanceReport]],
) -> int:
    """Run ``work`` here, or in the running server that holds the data dir (cli.owner)."""
    progress = TerminalProgress()

    async def here(engine: Engine, _args: argparse.Namespace) -> dict[str, Any]:
        report = await work(engine, progress)
        return {"report": report.to_dict(), "summary": report.summary().to_line()}

    try:
        out = run_here_or_in_owner(settings, args, here)
    except EngramError as exc:
        if args.summary_line:
            print(f"engram: error: {exc}", file=sys.stderr)
            emit_summary(_failed_summary(task, str(exc)))
            return 1
        raise
    finally:
        progress.close()
    return _finish(dict(out["report"]), str(out["summary"]), args)


# ------------------------------------------------------------------ commands
def _maintenance(settings: EngramSettings, args: argparse.Namespace) -> int:
    if args.task == "calibrate":
        return _calibrate(settings, args)
    if args.task == "reports":
        reports = latest_reports(settings.data_dir, max(1, args.limit))
        if args.json:
            print(json.dumps(reports, indent=2, ensure_ascii=False))
        else:
            print("\n".join(render_report(r) for r in reports) or "(no reports yet)")
        return 0
    from engram_api.maintenance.runner import run_maintenance

    task = Task(args.task)
    return _with_engine(
        settings,
        args,
        task,
        lambda engine, progress: run_maintenance(
            engine, task, dry_run=args.dry_run, progress=progress
        ),
    )


def _backup(settings: EngramSettings, args: argparse.Namespace) -> int:
    from engram_api.maintenance.backup import run_backup

    return _with_engine(
        settings, args, Task.backup, lambda engine, progress: run_backup(engine, progress=progress)
    )


def _print(result: dict[str, Any], args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print("\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in result.items()))
    return 0


def _restore(settings: EngramSettings, args: argparse.Namespace) -> int:
    from engram_api.maintenance.backup import restore

    progress = TerminalProgress()
    try:
        result = asyncio.run(
            restore(
                settings, args.path, collection=args.collection, force=args.force, progress=progress
            )
        )
    finally:
        progress.close()
    return _print(result, args)


def _export(settings: EngramSettings, args: argparse.Namespace) -> int:
    from engram_api.maintenance.backup import export_to

    progress = TerminalProgress()

    async def go() -> dict[str, Any]:
        async with open_engine(settings, background=False) as engine:
            return await export_to(engine, args.path, progress=progress)

    try:
        return _print(asyncio.run(go()), args)
    finally:
        progress.close()


def _import(settings: EngramSettings, args: argparse.Namespace) -> int:
    from engram_api.maintenance.backup import import_from

    progress = TerminalProgress()

    async def go() -> dict[str, Any]:
        async with open_engine(settings, background=False) as engine:
            return await import_from(engine, args.path, progress=progress)

    try:
        return _print(asyncio.run(go()), args)
    finally:
        progress.close()


def _calibrate(settings: EngramSettings, args: argparse.Namespace) -> int:
    from engram_api.maintenance.calibration import calibrate
    from engram_api.runtime import build_embedder

    if args.corpus is not None:
        return _calibrate_corpus(settings, args)

    async def go() -> dict[str, Any]:
        embedder = build_embedder(settings)
        try:
            return (await calibrate(embedder)).to_dict()
        finally:
            await embedder.aclose()

    result = asyncio.run(go())
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    rec = result["recommended"]
    print(f"model: {result['model_id']}")
    for kind in ("duplicates", "near_misses", "unrelated"):
        s = result[kind]
        print(
            f"  {kind:<12} n={s['n']:<3} min={s['min']:.3f} p05={s['p05']:.3f} "
            f"median={s['median']:.3f} p95={s['p95']:.3f} max={s['max']:.3f}"
        )
    print(
        f"recommended: dedup={rec['dedup']} related={rec['related']} "
        f"(duplicates caught {result['duplicate_recall']:.0%}, "
        f"near misses in the conflict band {result['near_miss_in_band']:.0%})"
    )
    profile = json.dumps({result["model_id"]: {"dedup": rec["dedup"], "related": rec["related"]}})
    print(f"to use it: ENGRAM_MAINTENANCE__PROFILES='{profile}'")
    return 0


def _calibrate_corpus(settings: EngramSettings, args: argparse.Namespace) -> int:
    from engram_api.maintenance import corpus
    from engram_api.maintenance.calibration import calibrate_corpus
    from engram_api.runtime import build_embedder

    try:
        pairs = [(p.label, p.a.content, p.b.content) for p in corpus.load(args.corpus)]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"engram: error: --corpus: cannot read {args.corpus}: {exc}", file=sys.stderr)
        return 2

    async def go() -> dict[str, Any]:
        embedder = build_embedder(settings)
        try:
            return (await calibrate_corpus(embedder, pairs)).to_dict()
        finally:
            await embedder.aclose()

    result = asyncio.run(go())
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    rec = result["recommended"]
    print(f"model: {result['model_id']} on {result['pairs']} labelled pairs")
    print("recommended: " + " ".join(f"{k}={v}" for k, v in rec.items()))
    print(
        f"duplicates merged {result['duplicate_recall']:.0%}, no distinct pair or "
        f"contradiction merged; contradictions resolvable offline "
        f"{result['contradictions_resolvable']:.0%}"
    )
    print(f"to use it: ENGRAM_MAINTENANCE__PROFILES='{json.dumps({result['model_id']: rec})}'")
    return 0

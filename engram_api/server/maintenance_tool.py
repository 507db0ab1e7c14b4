"""``mem0_maintenance``: read the latest maintenance reports, or run maintenance when allowed.

The maintenance package is optional at this layer: reports come from
``latest_reports(data_dir, limit)`` in ``engram_api.maintenance.report`` (or ``.reports``) and
runs from ``engram_api.maintenance.runner.run_maintenance(engine, task, dry_run=...)``, each
imported when first needed. Without them the tool says plainly what is not there yet.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
from collections.abc import Callable
from typing import Any, Final

from engram_api.errors import InvalidInput, PermissionDenied, Unavailable
from engram_api.runtime import Engine
from engram_contract.permissions import Operation

MODES: Final = ("report_only", "daily", "weekly")
REPORT_LIMIT: Final = 5
_NO_REPORTS: Final = (
    "no maintenance reports exist yet; maintenance runs on its schedule (EngramMaintenance in "
    "Kubernetes, or `engram maintenance daily|weekly`) and each run leaves a report here"
)


def _optional(module: str, name: str) -> Callable[..., Any] | None:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        # Only the module itself being absent means "not there yet"; a broken import inside it
        # is a real error.
        if exc.name is not None and module.startswith(exc.name):
            return None
        raise
    fn = getattr(mod, name, None)
    return fn if callable(fn) else None


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


def _jsonable(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


async def maintenance(engine: Engine, *, agent: str, mode: str, dry_run: bool) -> dict[str, Any]:
    mode = (mode or "report_only").strip().lower()
    if mode not in MODES:
        raise InvalidInput("mode", f"must be one of: {', '.join(MODES)}")
    policy = engine.service.policy
    if mode == "report_only":
        # Reports hold counts, not content: any agent that may see status may read them.
        if Operation.maintenance not in policy.policy_for(agent).operations:
            policy.require(agent, Operation.status)
        latest = _optional("engram_api.maintenance.report", "latest_reports") or _optional(
            "engram_api.maintenance.reports", "latest_reports"
        )
        reports: list[Any] = []
        if latest is not None:
            reports = list(await _call(latest, engine.settings.data_dir, REPORT_LIMIT))
        out: dict[str, Any] = {
            "mode": mode,
            "reports": [_jsonable(r) for r in reports],
            "count": len(reports),
        }
        if not reports:
            out["message"] = _NO_REPORTS
        return out
    if Operation.maintenance not in policy.policy_for(agent).operations:
        raise PermissionDenied(
            f"mode: running {mode} maintenance needs the 'maintenance' permission, which agent "
            f"'{agent}' does not have; mode='report_only' reads the latest reports",
            field="mode",
        )
    run = _optional("engram_api.maintenance.runner", "run_maintenance")
    if run is None:
        raise Unavailable(
            f"mode: running {mode} maintenance from the tool is not available yet in this "
            f"version; run `engram maintenance {mode}` on the server, or read reports with "
            "mode='report_only'"
        )
    result = await _call(run, engine, mode, dry_run=dry_run)
    return {"mode": mode, "dry_run": dry_run, "result": _jsonable(result)}

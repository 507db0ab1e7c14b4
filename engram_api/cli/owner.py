"""CLI commands beside a running server: open the data dir, or ask the process that holds it.

With nothing running, a command opens the store as it always did. When ``engram serve`` or
``engram stdio`` holds the data dir, the same command is sent over its control socket
(:mod:`engram_api.control`) and run there, on the server's engine, with the same result.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from engram_api.control import Handler, call_owner
from engram_api.errors import StoreLocked
from engram_api.runtime import Engine, open_engine
from engram_api.settings import EngramSettings


def run_here_or_in_owner(
    settings: EngramSettings,
    args: argparse.Namespace,
    handler: Callable[[Engine, argparse.Namespace], Awaitable[dict[str, Any]]],
    *,
    command: str | None = None,
) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        try:
            async with open_engine(settings, background=False) as engine:
                return await handler(engine, args)
        except StoreLocked as locked:
            return await call_owner(settings.data_dir, locked, command or args.command, args)

    return asyncio.run(go())


async def _maintenance(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    from engram_api.maintenance.runner import run_maintenance
    from engram_contract.report import Task

    if args.task not in ("daily", "weekly"):
        from engram_api.errors import InvalidInput

        raise InvalidInput("task", "only daily and weekly run through a running server")
    report = await run_maintenance(engine, Task(args.task), dry_run=bool(args.dry_run))
    return {"report": report.to_dict(), "summary": report.summary().to_line()}


async def _backup(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    from engram_api.maintenance.backup import run_backup

    report = await run_backup(engine)
    return {"report": report.to_dict(), "summary": report.summary().to_line()}


def handlers() -> dict[str, Handler]:
    """What a running server answers on its control socket (the CLI's own handlers)."""
    from engram_api.cli.memory_commands import HANDLERS

    return {**HANDLERS, "maintenance": _maintenance, "backup": _backup}

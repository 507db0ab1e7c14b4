"""The same tools over stdio, for desktop clients that launch Engram as a subprocess.

There are no HTTP headers on a pipe: whoever launched the process owns the data dir, so the
``agent`` argument is trusted (default: the CLI's ``--agent``). stdout carries only MCP
messages; logs go to stderr.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from engram_api.control import Handler, serve_control
from engram_api.runtime import open_engine
from engram_api.server.calls import ToolRuntime
from engram_api.server.metrics import Metrics
from engram_api.server.reload import PermissionWatcher
from engram_api.server.tools import build_mcp
from engram_api.settings import EngramSettings

log = logging.getLogger(__name__)


async def run_stdio(
    settings: EngramSettings,
    *,
    default_agent: str = "main",
    control_handlers: Mapping[str, Handler] | None = None,
) -> None:
    metrics = Metrics()
    runtime = ToolRuntime(metrics=metrics, transport="stdio", default_agent=default_agent)
    mcp = build_mcp(runtime)
    async with (
        open_engine(
            settings, holder="engram stdio", control=control_handlers is not None
        ) as engine,
        serve_control(engine, settings.data_dir, control_handlers)
        if control_handlers is not None
        else contextlib.nullcontext(),
    ):
        runtime.engine = engine
        watcher = PermissionWatcher(
            settings.permissions_file,
            engine.service.policy,
            metrics,
            interval_s=settings.server.permissions_poll_s,
        )
        watcher.prime()
        watcher.start()
        log.info(
            "engram serving MCP over stdio",
            extra={"default_agent": default_agent, "store": engine.store.kind},
        )
        try:
            await mcp.run_stdio_async()
        finally:
            await watcher.stop()
            runtime.engine = None

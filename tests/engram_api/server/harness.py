"""The test harness for the MCP service: the real app under uvicorn on a free loopback port,
driven by the MCP SDK's streamable HTTP client, and a few permission configs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from engram_api.server.app import create_app
from engram_api.settings import EngramSettings
from engram_contract.permissions import (
    AgentPolicy,
    Operation,
    PermissionConfig,
    ServiceAccountRef,
    Trust,
    dump_permission_config,
    hash_token,
)

ALPHA_TOKEN = "engram_alpha-token-for-tests-0123456789"
BETA_TOKEN = "engram_beta-token-for-tests-0123456789"
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.serviceaccount-token-for-tests"
EVERY_OP = list(Operation)


async def wait_until(condition: Callable[[], Any], *, within: float = 10.0) -> None:
    """Poll a (sync or async) condition until true; fail after ``within`` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(0.02)


def token_config(*, alpha_extra_ops: list[Operation] | None = None) -> PermissionConfig:
    """alpha and beta hold tokens; ops is bound to the ServiceAccount team-a/bot."""
    return PermissionConfig(
        agents={
            "alpha": AgentPolicy(
                read=["global", "group:*", "agent:alpha"],
                write=["global", "group:*", "agent:alpha"],
                operations=[
                    Operation.add,
                    Operation.search,
                    Operation.get_all,
                    Operation.status,
                    Operation.forget,
                    *(alpha_extra_ops or []),
                ],
                max_trust=Trust.medium,
                token_sha256=[hash_token(ALPHA_TOKEN)],
            ),
            "beta": AgentPolicy(
                read=["global", "agent:beta"],
                write=["agent:beta"],
                operations=[Operation.add, Operation.search],
                max_trust=Trust.low,
                token_sha256=[hash_token(BETA_TOKEN)],
            ),
            "ops": AgentPolicy(
                read=["global", "group:*"],
                write=["global"],
                operations=EVERY_OP,
                max_trust=Trust.high,
                service_accounts=[ServiceAccountRef(namespace="team-a", name="bot")],
            ),
        }
    )


def write_config(path: Path, config: PermissionConfig) -> Path:
    # Write then rename, as a ConfigMap update does: a reader never sees half a file.
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dump_permission_config(config), encoding="utf-8")
    os.replace(tmp, path)
    return path


@dataclass
class RunningServer:
    app: FastAPI
    base_url: str
    # The /metrics listener (its own port).
    metrics_base_url: str = ""

    @property
    def metrics_url(self) -> str:
        return self.metrics_base_url + "/metrics"

    @property
    def mcp_url(self) -> str:
        return self.base_url + "/mcp"

    @contextlib.asynccontextmanager
    async def client(
        self, token: str | None = None, *, mode: str = "auto"
    ) -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
            Client(streamable_http_client(self.mcp_url, http_client=http), mode=mode) as client,
        ):
            yield client


@contextlib.asynccontextmanager
async def serve(
    settings: EngramSettings, *, startup_within: float = 30, **app_kwargs: Any
) -> AsyncIterator[RunningServer]:
    """Run the real app with uvicorn on a free loopback port until the block ends.

    ``startup_within``: the bound on startup; the real model loads in ~1 s on an idle machine,
    much longer on a shared one."""
    app = create_app(settings, **app_kwargs)
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it every response waits ~40 ms for a delayed ACK.
    socks = []
    for _ in range(2):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
    port, metrics_port = (s.getsockname()[1] for s in socks)
    app.state.engram.metrics_port = metrics_port
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=socks))
    try:
        await wait_until(lambda: server.started or task.done(), within=startup_within)
        if task.done():
            task.result()
            raise AssertionError("the server stopped during startup")
        yield RunningServer(
            app=app,
            base_url=f"http://127.0.0.1:{port}",
            metrics_base_url=f"http://127.0.0.1:{metrics_port}",
        )
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=30)
        for sock in socks:
            sock.close()


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured answer."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; the error text the model reads."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return _text(result)


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)

"""Which binds start, which refuse, and `engram serve` as a real process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from engram_api.cli import main
from engram_api.runtime import StartupError
from engram_api.server.app import create_app
from engram_api.settings import EngramSettings, KubernetesAuthSettings
from engram_contract.permissions import PermissionConfig
from tests.engram_api.server.harness import (
    ALPHA_TOKEN,
    serve,
    token_config,
    wait_until,
    write_config,
)

ENGRAM = str(Path(sys.executable).with_name("engram"))
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


def test_a_non_loopback_bind_without_auth_refuses_to_start(
    make_settings: Callable[..., EngramSettings],
) -> None:
    with pytest.raises(StartupError, match=r"server\.host=0\.0\.0\.0 is not a loopback address"):
        create_app(make_settings(host="0.0.0.0"))


@pytest.mark.parametrize(
    "extra",
    [
        {"insecure_no_auth": True},
        {"permissions": "tokens"},
        {"kubernetes": KubernetesAuthSettings(enabled=True, api_url="http://127.0.0.1:1")},
    ],
)
def test_a_non_loopback_bind_starts_with_auth_or_when_told_it_is_insecure(
    make_settings: Callable[..., EngramSettings], extra: dict[str, object]
) -> None:
    if extra.get("permissions") == "tokens":
        extra = {"permissions": token_config()}
    app = create_app(make_settings(host="0.0.0.0", **extra))
    assert app.state.engram.settings.server.host == "0.0.0.0"


def test_the_cli_refuses_an_open_bind_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--data-dir", str(tmp_path), "serve", "--host", "0.0.0.0", "--port", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "engram: error: server.host=0.0.0.0 is not a loopback address" in err
    assert "--insecure-no-auth" in err


def test_the_cli_rejects_a_bad_port_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--data-dir", str(tmp_path), "serve", "--port", "70000"])
    assert code == 2
    assert "--port" in capsys.readouterr().err


async def test_removing_every_credential_from_a_public_server_locks_it(
    make_settings: Callable[..., EngramSettings],
) -> None:
    # Configured for 0.0.0.0 (the harness still binds loopback): only tokens let it start.
    settings = make_settings(host="0.0.0.0", permissions=token_config())
    assert settings.permissions_file is not None
    async with serve(settings) as running, httpx.AsyncClient() as http:
        before = await http.post(
            running.mcp_url, json=LIST, headers=HEADERS | {"authorization": f"Bearer {ALPHA_TOKEN}"}
        )
        write_config(settings.permissions_file, PermissionConfig())

        async def old_token_refused() -> bool:
            resp = await http.post(
                running.mcp_url,
                json=LIST,
                headers=HEADERS | {"authorization": f"Bearer {ALPHA_TOKEN}"},
            )
            return resp.status_code == 401

        await wait_until(old_token_refused)
        anonymous = await http.post(running.mcp_url, json=LIST, headers=HEADERS)
        as_main = await http.post(
            running.mcp_url,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "mem0_status", "arguments": {"agent": "main"}},
            },
            headers=HEADERS,
        )
    assert before.status_code == 200
    assert anonymous.status_code == 401
    assert as_main.status_code == 401


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_engram_serve_runs_as_a_process_logs_json_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    port, metrics_port = _free_port(), _free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER": "hash",
        "ENGRAM_SERVER__PORT": str(port),
        "ENGRAM_SERVER__METRICS_PORT": str(metrics_port),
    }
    proc = await asyncio.create_subprocess_exec(
        ENGRAM, "serve", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with httpx.AsyncClient() as http:

            async def healthy() -> bool:
                assert proc.returncode is None, "engram serve exited early"
                try:
                    return (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
                except httpx.TransportError:
                    return False

            await wait_until(healthy, within=60)
            ready = await http.get(f"http://127.0.0.1:{port}/readyz")
            metrics = await http.get(f"http://127.0.0.1:{metrics_port}/metrics")
            not_on_main = await http.get(f"http://127.0.0.1:{port}/metrics")
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.communicate()
    assert ready.status_code == 200
    assert ready.json() == {"ready": True}
    assert "engram_tool_calls" in metrics.text
    assert not_on_main.status_code == 404
    # uvicorn shuts down gracefully, then re-raises the signal so the parent sees it.
    assert proc.returncode in (0, -signal.SIGTERM)
    assert out == b""
    lines = [json.loads(line) for line in err.decode().splitlines() if line.strip()]
    messages = [line["msg"] for line in lines]
    assert "engram serving MCP" in messages
    assert "Application shutdown complete." in messages
    assert all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)

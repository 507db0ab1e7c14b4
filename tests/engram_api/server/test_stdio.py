"""`engram stdio` as a subprocess, driven by the MCP SDK's stdio client: every tool."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters, stdio_client

from tests.engram_api.server.harness import call, call_error, token_config, write_config

ENGRAM = str(Path(sys.executable).with_name("engram"))


def _params(tmp_path: Path, *args: str, permissions: Path | None = None) -> StdioServerParameters:
    env = {
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER": "hash",
    }
    if permissions is not None:
        env["ENGRAM_PERMISSIONS_FILE"] = str(permissions)
    return StdioServerParameters(command=ENGRAM, args=[*args, "stdio"], env=env, cwd=tmp_path)


async def test_every_tool_works_over_stdio(tmp_path: Path) -> None:
    log_path = tmp_path / "stderr.log"
    with log_path.open("w") as errlog:
        async with Client(stdio_client(_params(tmp_path), errlog=errlog)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            added = await call(
                client, "mem0_add", content="Desktop clients talk over stdio", scope="global"
            )
            found = await call(client, "mem0_search", query="desktop clients stdio")
            listing = await call(client, "mem0_get_all")
            status = await call(client, "mem0_status")
            reports = await call(client, "mem0_maintenance")
            forgot = await call(client, "mem0_forget", memory_id=added["id"], reason="test")
            denied = await call_error(client, "mem0_maintenance", mode="weekly")
            bad = await call_error(client, "mem0_add", content="x", scope="cross:a")
    assert names == {
        "mem0_add",
        "mem0_search",
        "mem0_get_all",
        "mem0_status",
        "mem0_maintenance",
        "mem0_forget",
    }
    assert added["memory"]["agent"] == "main"
    assert found["results"][0]["id"] == added["id"]
    assert listing["total"] == 1
    assert status["active_memories"] == 1
    assert reports["mode"] == "report_only"
    assert forgot["status"] == "archived"
    assert "'maintenance' permission" in denied
    assert "scope: 'all' and 'cross:<group-id>' are search-only" in bad
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    calls = [line for line in lines if line["msg"] == "tool call"]
    assert len(calls) == 8
    assert {line["transport"] for line in calls} == {"stdio"}
    assert "Desktop clients talk over stdio" not in log_path.read_text()


async def test_stdio_defaults_to_the_cli_agent_and_trusts_the_argument(tmp_path: Path) -> None:
    # Tokens mean nothing on a pipe: the process owner already owns the data dir.
    perms = write_config(tmp_path / "permissions.yaml", token_config())
    params = _params(tmp_path, "--agent", "alpha", permissions=perms)
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            as_alpha = await call(client, "mem0_add", content="Alpha over stdio", scope="global")
            as_beta = await call_error(
                client, "mem0_add", content="Beta", scope="global", agent="beta"
            )
    assert as_alpha["memory"]["agent"] == "alpha"
    assert "agent 'beta' cannot write to scope 'global'" in as_beta


async def test_stdio_with_an_invalid_permission_file_exits_2_naming_it(tmp_path: Path) -> None:
    perms = tmp_path / "permissions.yaml"
    perms.write_text("agents: [not, a, mapping]\n", encoding="utf-8")
    params = _params(tmp_path, permissions=perms)
    proc = await asyncio.create_subprocess_exec(
        params.command,
        *params.args,
        env={"PATH": os.environ.get("PATH", ""), **(params.env or {})},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2
    assert out == b""
    assert f"engram: error: permissions_file {perms}: line 1: agents" in err.decode()

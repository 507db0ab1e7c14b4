"""The permission file is reloaded on change; a bad version is rejected, the last good stays."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import httpx
import pytest

from engram_api.settings import EngramSettings
from engram_contract.permissions import AgentPolicy, Operation, hash_token
from tests.engram_api.server.harness import (
    ALPHA_TOKEN,
    BETA_TOKEN,
    call,
    call_error,
    serve,
    token_config,
    wait_until,
    write_config,
)

GAMMA_TOKEN = "engram_gamma-token-for-tests-0123456789"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}

# /readyz shows its parts only to an agent allowed `status` (alpha is).
DETAIL = {"authorization": f"Bearer {ALPHA_TOKEN}"}


async def _status_code(url: str, token: str) -> int:
    async with httpx.AsyncClient() as http:
        resp = await http.post(
            url, json=LIST, headers=HEADERS | {"authorization": f"Bearer {token}"}
        )
    return resp.status_code


async def test_a_new_agent_token_works_after_the_file_changes(
    make_settings: Callable[..., EngramSettings],
) -> None:
    settings = make_settings(permissions=token_config())
    assert settings.permissions_file is not None
    async with serve(settings) as running:
        assert await _status_code(running.mcp_url, GAMMA_TOKEN) == 401
        config = token_config()
        config.agents["gamma"] = AgentPolicy(
            read=["global"],
            write=["global"],
            operations=[Operation.add, Operation.search, Operation.status],
            token_sha256=[hash_token(GAMMA_TOKEN)],
        )
        write_config(settings.permissions_file, config)

        async def accepted() -> bool:
            return await _status_code(running.mcp_url, GAMMA_TOKEN) == 200

        await wait_until(accepted)
        async with running.client(GAMMA_TOKEN) as client:
            out = await call(client, "mem0_add", content="Gamma joined the team", scope="global")
        async with httpx.AsyncClient() as http:
            metrics = (await http.get(running.metrics_url)).text
    assert out["memory"]["agent"] == "gamma"
    assert 'engram_permission_reloads_total{result="applied"} 1.0' in metrics


async def test_permissions_narrowed_by_a_reload_apply_to_the_next_call(
    make_settings: Callable[..., EngramSettings],
) -> None:
    settings = make_settings(permissions=token_config())
    assert settings.permissions_file is not None
    async with serve(settings) as running, running.client(ALPHA_TOKEN) as client:
        await call(client, "mem0_add", content="Alpha may write global", scope="global")
        narrowed = token_config()
        narrowed.agents["alpha"].write = ["agent:alpha"]
        write_config(settings.permissions_file, narrowed)

        async def refused() -> bool:
            result = await client.call_tool(
                "mem0_add", {"content": "Alpha writes global again", "scope": "global"}
            )
            return bool(result.is_error)

        await wait_until(refused)
        message = await call_error(client, "mem0_add", content="One more", scope="global")
    assert "cannot write to scope 'global'" in message


async def test_an_invalid_file_is_rejected_logged_and_the_last_good_config_stays(
    make_settings: Callable[..., EngramSettings], caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(permissions=token_config())
    assert settings.permissions_file is not None
    async with serve(settings) as running, httpx.AsyncClient() as http:
        settings.permissions_file.write_text(
            "agents:\n  alpha:\n    read: ['group:']\n", encoding="utf-8"
        )

        async def rejected() -> bool:
            body = (await http.get(running.base_url + "/readyz", headers=DETAIL)).json()
            return "rejected_update" in body["permissions"]

        await wait_until(rejected)
        ready = await http.get(running.base_url + "/readyz", headers=DETAIL)
        still_alpha = await _status_code(running.mcp_url, ALPHA_TOKEN)
        still_beta = await _status_code(running.mcp_url, BETA_TOKEN)
        metrics = (await http.get(running.metrics_url)).text
    assert ready.status_code == 200
    assert "agents.alpha.read" in ready.json()["permissions"]["rejected_update"]
    assert (still_alpha, still_beta) == (200, 200)
    assert 'engram_permission_reloads_total{result="rejected"} 1.0' in metrics
    errors = [
        r for r in caplog.records if r.levelno == logging.ERROR and "not applied" in r.getMessage()
    ]
    assert len(errors) == 1
    assert "agents.alpha.read" in errors[0].__dict__["error"]


async def test_a_reload_under_load_drops_no_request(
    make_settings: Callable[..., EngramSettings],
) -> None:
    settings = make_settings(permissions=token_config())
    assert settings.permissions_file is not None
    async with serve(settings) as running, running.client(ALPHA_TOKEN) as client:
        stop = asyncio.Event()
        answered = 0

        async def searcher() -> None:
            nonlocal answered
            while not stop.is_set():
                await call(client, "mem0_search", query="anything at all")
                answered += 1

        workers = [asyncio.create_task(searcher()) for _ in range(4)]
        async with httpx.AsyncClient() as http:

            async def digest() -> str:
                body = (await http.get(running.base_url + "/readyz", headers=DETAIL)).json()
                return str(body["permissions"]["digest"])

            for i in range(5):
                before = await digest()
                config = token_config()
                config.agents["alpha"].read = ["global", f"group:g{i}"]
                write_config(settings.permissions_file, config)

                async def applied(before: str = before) -> bool:
                    return await digest() != before

                await wait_until(applied)
            stop.set()
            await asyncio.gather(*workers)
            metrics = (await http.get(running.metrics_url)).text
    assert 'engram_permission_reloads_total{result="applied"} 5.0' in metrics
    assert answered > 0

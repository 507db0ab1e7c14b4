"""The secret guard through the real app over HTTP: refusals, and the event loop kept free."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx

from tests.engram_api.server.harness import RunningServer, call, call_error, wait_until

# Bounds, not benchmarks (bench/guard.py measures): the old guard held /healthz for 12.8 s.
HEALTHZ_BOUND_S = 2.0


async def _healthz_while(server: RunningServer, busy: asyncio.Task[object]) -> float:
    """The slowest /healthz answer seen while ``busy`` runs (at least one probe)."""
    slowest = 0.0
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        while True:
            started = time.perf_counter()
            assert (await http.get("/healthz")).status_code == 200
            slowest = max(slowest, time.perf_counter() - started)
            if busy.done():
                return slowest


async def test_60_kb_of_dashes_is_refused_by_length_and_healthz_is_not_held_up(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        add = asyncio.create_task(
            call_error(client, "mem0_add", content="a-" * 30000, scope="global")
        )
        slowest = await _healthz_while(local_server, add)
        message = await add
    assert "content: must be at most 8000 characters" in message
    assert slowest < HEALTHZ_BOUND_S


async def test_the_largest_allowed_adversarial_body_is_scanned_without_holding_up_healthz(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        add = asyncio.create_task(call(client, "mem0_add", content="a-" * 4000, scope="global"))
        slowest = await _healthz_while(local_server, add)
        stored = await add
    assert stored["status"] == "stored"
    assert slowest < HEALTHZ_BOUND_S


async def test_the_scan_runs_off_the_event_loop(local_server: RunningServer) -> None:
    guard = local_server.app.state.engram.engine.service.guard
    entered, release = threading.Event(), threading.Event()
    real_find = guard.find

    def blocking_find(text: str) -> str | None:
        entered.set()
        release.wait(30)
        return real_find(text)

    guard.find = blocking_find
    try:
        async with local_server.client() as client:
            add = asyncio.create_task(call(client, "mem0_add", content="tea", scope="global"))
            await wait_until(entered.is_set)
            async with httpx.AsyncClient(base_url=local_server.base_url, timeout=10) as http:
                assert (await http.get("/healthz")).status_code == 200
            assert not add.done()
            release.set()
            assert (await add)["status"] == "stored"
    finally:
        release.set()
        guard.find = real_find


async def test_secrets_are_refused_in_content_context_and_forget_reason_without_echoing_them(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        in_content = await call_error(
            client, "mem0_add", content="我的密码是 hunter22", scope="global"
        )
        in_context = await call_error(
            client,
            "mem0_add",
            content="deploy notes",
            context='{"api_key": "zq8KmW3vXp7LnR2t"}',
            scope="global",
        )
        stored = await call(client, "mem0_add", content="old office is in berlin", scope="global")
        in_reason = await call_error(
            client,
            "mem0_forget",
            memory_id=stored["id"],
            reason="rotated, new DB_PASSWORD=hunter22",
        )
        page = await call(client, "mem0_get_all", include_archived=True)
    assert "content:" in in_content
    assert "hunter22" not in in_content
    assert "context:" in in_context
    assert "zq8K" not in in_context
    assert "reason:" in in_reason
    assert "hunter22" not in in_reason
    assert [m["archived"] for m in page["results"]] == [False]
    assert all("hunter22" not in m.get("archived_reason", "") for m in page["results"])

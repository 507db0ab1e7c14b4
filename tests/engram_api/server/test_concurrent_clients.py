"""Many clients at once: every request stands alone, identities never cross."""

from __future__ import annotations

import asyncio

from tests.engram_api.server.harness import ALPHA_TOKEN, BETA_TOKEN, RunningServer, call

CLIENTS = 8
WRITES = 4


async def test_concurrent_clients_each_store_and_find_their_own_memories(
    local_server: RunningServer,
) -> None:
    async def one(i: int) -> list[str]:
        async with local_server.client() as client:
            ids = []
            for j in range(WRITES):
                out = await call(
                    client, "mem0_add", content=f"client {i} fact {j} orchid", scope=f"group:c{i}"
                )
                ids.append(out["id"])
            found = await call(
                client,
                "mem0_search",
                query=f"client {i} fact orchid",
                scope=f"group:c{i}",
                limit=10,
            )
            assert {r["scope"] for r in found["results"]} == {f"group:c{i}"}
            assert set(ids) <= {r["id"] for r in found["results"]}
            return ids

    results = await asyncio.gather(*(one(i) for i in range(CLIENTS)))
    async with local_server.client() as client:
        listing = await call(client, "mem0_get_all", limit=200)
    assert listing["total"] == CLIENTS * WRITES
    assert len({i for ids in results for i in ids}) == CLIENTS * WRITES


async def test_concurrent_callers_with_different_tokens_keep_their_identities(
    token_server: RunningServer,
) -> None:
    async def caller(token: str, agent: str, scope: str) -> None:
        async with token_server.client(token) as client:
            for j in range(6):
                out = await call(client, "mem0_add", content=f"{agent} note {j}", scope=scope)
                assert out["memory"]["agent"] == agent

    await asyncio.gather(
        caller(ALPHA_TOKEN, "alpha", "agent:alpha"),
        caller(BETA_TOKEN, "beta", "agent:beta"),
        caller(ALPHA_TOKEN, "alpha", "group:shared"),
        caller(BETA_TOKEN, "beta", "agent:beta"),
    )
    async with token_server.client(ALPHA_TOKEN) as client:
        mine = await call(client, "mem0_get_all", scope="agent:alpha")
        shared = await call(client, "mem0_get_all", scope="group:shared")
    assert mine["total"] == 6
    assert shared["total"] == 6
    assert {r["agent"] for r in mine["results"] + shared["results"]} == {"alpha"}

"""Token mode: every request carries a bearer token that maps to an agent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from engram_api.settings import EngramSettings
from tests.engram_api.server.harness import (
    ALPHA_TOKEN,
    BETA_TOKEN,
    RunningServer,
    call,
    call_error,
    serve,
    token_config,
)

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


@pytest.mark.parametrize(
    ("authorization", "error"),
    [
        (None, None),
        ("Basic YWxwaGE6c2VjcmV0", None),
        ("Bearer", None),
        ("Bearer engram_not-a-token", "invalid_token"),
        (f"Bearer {ALPHA_TOKEN}x", "invalid_token"),
    ],
)
async def test_requests_without_a_valid_token_get_401_with_a_bearer_challenge(
    token_server: RunningServer, authorization: str | None, error: str | None
) -> None:
    headers = dict(HEADERS)
    if authorization is not None:
        headers["authorization"] = authorization
    async with httpx.AsyncClient() as http:
        resp = await http.post(token_server.mcp_url, json=INIT, headers=headers)
    challenge = resp.headers["www-authenticate"]
    assert resp.status_code == 401
    assert challenge.startswith('Bearer realm="engram"')
    if error is None:
        # RFC 6750: no error code when no credentials were offered at all.
        assert "error=" not in challenge
    else:
        assert f'error="{error}"' in challenge
    assert resp.json()["error_description"]
    assert "tools" not in resp.text


async def test_no_oauth_discovery_is_advertised_so_clients_send_their_header(
    token_server: RunningServer,
) -> None:
    # Cursor and Claude Code switch to an OAuth flow (and drop the configured Authorization
    # header) when they find discovery metadata; Engram's tokens are not OAuth tokens.
    async with httpx.AsyncClient(base_url=token_server.base_url) as http:
        resp = await http.post("/mcp", json=INIT, headers=HEADERS)
        probes = [
            await http.get(path)
            for path in (
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-authorization-server",
                "/.well-known/openid-configuration",
            )
        ]
    assert "resource_metadata" not in resp.headers["www-authenticate"]
    assert [p.status_code for p in probes] == [404, 404, 404, 404]
    assert {p.json()["error"] for p in probes} == {"not_found"}


async def test_health_endpoints_need_no_token(token_server: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=token_server.base_url) as http:
        assert (await http.get("/healthz")).status_code == 200
        ready = await http.get("/readyz")
        assert (await http.get(token_server.metrics_url)).status_code == 200
    assert ready.status_code == 200


async def test_readyz_without_a_token_says_ready_or_not_and_nothing_more(
    token_server: RunningServer,
) -> None:
    async with httpx.AsyncClient(base_url=token_server.base_url) as http:
        bare = await http.get("/readyz")
        wrong = await http.get("/readyz", headers={"authorization": "Bearer not-a-token"})
        # beta may not call status: a valid token is not enough to see the parts.
        beta = await http.get("/readyz", headers={"authorization": f"Bearer {BETA_TOKEN}"})
        alpha = await http.get("/readyz", headers={"authorization": f"Bearer {ALPHA_TOKEN}"})
    assert bare.json() == wrong.json() == beta.json() == {"ready": True}
    assert alpha.json()["ready"] is True
    assert alpha.json()["store"]["ready"] is True
    assert "digest" in alpha.json()["permissions"]


async def test_metrics_are_not_served_on_the_mcp_port(token_server: RunningServer) -> None:
    async with httpx.AsyncClient() as http:
        main = await http.get(token_server.base_url + "/metrics")
        other = await http.get(token_server.metrics_base_url + "/mcp")
    assert main.status_code == 404
    assert other.status_code == 404


async def test_the_mcp_client_without_a_token_is_refused(token_server: RunningServer) -> None:
    with pytest.raises(ExceptionGroup) as info:
        async with token_server.client() as client:
            await client.list_tools()
    assert info.group_contains(MCPError)
    async with httpx.AsyncClient() as http:
        text = (await http.get(token_server.metrics_url)).text
    assert 'engram_auth_failures_total{reason="missing"}' in text


async def test_a_token_acts_as_its_agent_when_agent_is_omitted(
    token_server: RunningServer,
) -> None:
    async with token_server.client(ALPHA_TOKEN) as client:
        out = await call(client, "mem0_add", content="Deploys happen on Tuesdays", scope="global")
        same = await call(client, "mem0_search", query="deploys tuesday", agent="alpha")
    assert out["memory"]["agent"] == "alpha"
    assert same["results"][0]["agent"] == "alpha"


async def test_a_spoofed_agent_argument_is_a_tool_error_and_changes_nothing(
    token_server: RunningServer,
) -> None:
    async with token_server.client(BETA_TOKEN) as beta:
        message = await call_error(
            beta, "mem0_add", content="I am alpha now", scope="global", agent="alpha"
        )
    async with token_server.client(ALPHA_TOKEN) as alpha:
        listing = await call(alpha, "mem0_get_all")
    assert "agent: this connection is authenticated as agent 'beta'" in message
    assert "(agent_mismatch)" in message
    assert listing["total"] == 0


async def test_each_token_gets_its_own_agents_permissions(token_server: RunningServer) -> None:
    async with token_server.client(BETA_TOKEN) as beta:
        denied = await call_error(beta, "mem0_add", content="Global news", scope="global")
        own = await call(
            beta, "mem0_add", content="Beta private note", scope="agent:beta", trust="high"
        )
        no_listing = await call_error(beta, "mem0_get_all")
    assert "scope: agent 'beta' cannot write to scope 'global'" in denied
    assert own["memory"]["trust"] == "low"
    assert own["trust_capped"] is True
    assert "'get_all' operation" in no_listing


async def test_token_mode_on_loopback_still_requires_tokens(
    make_settings: Callable[..., EngramSettings],
) -> None:
    settings = make_settings(permissions=token_config(), host="127.0.0.1")
    async with serve(settings) as running, httpx.AsyncClient() as http:
        resp = await http.post(running.mcp_url, json=INIT, headers=HEADERS)
    assert resp.status_code == 401


async def test_auth_failures_are_counted_by_reason(token_server: RunningServer) -> None:
    async with httpx.AsyncClient() as http:
        await asyncio.gather(
            http.post(token_server.mcp_url, json=INIT, headers=HEADERS),
            http.post(
                token_server.mcp_url,
                json=INIT,
                headers=HEADERS | {"authorization": "Bearer wrong"},
            ),
        )
        text = (await http.get(token_server.metrics_url)).text
    assert 'engram_auth_failures_total{reason="missing"} 1.0' in text
    assert 'engram_auth_failures_total{reason="unknown_token"} 1.0' in text

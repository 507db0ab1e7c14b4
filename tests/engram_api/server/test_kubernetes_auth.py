"""Kubernetes mode: ServiceAccount tokens checked with TokenReview through the real kubernetes
client, against kmock's in-process API server."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import kmock
import pytest

from engram_api.runtime import StartupError
from engram_api.server.app import create_app
from engram_api.settings import EngramSettings, KubernetesAuthSettings
from tests.engram_api.server.harness import (
    ALPHA_TOKEN,
    SA_TOKEN,
    RunningServer,
    call,
    call_error,
    serve,
    token_config,
)

REVIEWS = "post /apis/authentication.k8s.io/v1/tokenreviews"
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def review_answer(user: str, audiences: list[str]) -> Callable[[kmock.Request], dict[str, Any]]:
    """An API server that knows SA_TOKEN as ``user``; every other token is unknown."""

    def answer(request: kmock.Request) -> dict[str, Any]:
        spec = request.data["spec"]
        ok = spec["token"] == SA_TOKEN
        status: dict[str, Any] = {"authenticated": ok}
        if ok:
            status["user"] = {"username": user, "groups": ["system:serviceaccounts"]}
            status["audiences"] = [a for a in spec.get("audiences") or [] if a in audiences]
        else:
            status["error"] = "invalid bearer token"
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": spec,
            "status": status,
        }

    return answer


@pytest.fixture
async def k8s_server(
    kmock: kmock.RawHandler, make_settings: Callable[..., EngramSettings]
) -> AsyncIterator[RunningServer]:
    kmock[REVIEWS] << review_answer("system:serviceaccount:team-a:bot", ["engram"])
    settings = make_settings(
        permissions=token_config(),
        kubernetes=KubernetesAuthSettings(
            enabled=True, audience="engram", api_url=str(kmock.url), cache_ttl_s=60
        ),
    )
    async with serve(settings) as running:
        yield running


async def test_a_bound_service_account_token_acts_as_its_agent(
    k8s_server: RunningServer, kmock: kmock.RawHandler
) -> None:
    async with k8s_server.client(SA_TOKEN) as client:
        out = await call(client, "mem0_add", content="Cluster upgrades on Sunday", scope="global")
        status = await call(client, "mem0_status")
    assert out["memory"]["agent"] == "ops"
    assert status["agent"] == "ops"
    [review] = list(kmock[REVIEWS])
    sent = review.data
    assert sent["kind"] == "TokenReview"
    assert sent["spec"] == {"token": SA_TOKEN, "audiences": ["engram"]}


async def test_reviews_are_cached_so_repeated_calls_ask_the_api_once(
    k8s_server: RunningServer, kmock: kmock.RawHandler
) -> None:
    async with k8s_server.client(SA_TOKEN) as client:
        await asyncio.gather(*(call(client, "mem0_status") for _ in range(8)))
        await call(client, "mem0_search", query="anything")
    assert len(kmock[REVIEWS]) == 1


async def test_agent_tokens_still_work_without_asking_the_api(
    k8s_server: RunningServer, kmock: kmock.RawHandler
) -> None:
    async with k8s_server.client(ALPHA_TOKEN) as client:
        out = await call(client, "mem0_status")
    assert out["agent"] == "alpha"
    assert len(kmock[REVIEWS]) == 0


async def test_a_service_account_token_cannot_claim_another_agent(
    k8s_server: RunningServer,
) -> None:
    async with k8s_server.client(SA_TOKEN) as client:
        message = await call_error(client, "mem0_status", agent="alpha")
    assert "authenticated as agent 'ops'" in message


async def test_an_unknown_token_is_401_after_the_review(
    k8s_server: RunningServer, kmock: kmock.RawHandler
) -> None:
    async with httpx.AsyncClient() as http:
        resp = await http.post(
            k8s_server.mcp_url, json=LIST, headers=HEADERS | {"authorization": "Bearer forged"}
        )
    assert resp.status_code == 401
    assert 'error="invalid_token"' in resp.headers["www-authenticate"]
    [review] = list(kmock[REVIEWS])
    assert review.data["spec"]["token"] == "forged"


async def test_an_unbound_service_account_is_403_naming_it(
    kmock: kmock.RawHandler, make_settings: Callable[..., EngramSettings]
) -> None:
    kmock[REVIEWS] << review_answer("system:serviceaccount:team-b:stranger", ["engram"])
    settings = make_settings(
        permissions=token_config(),
        kubernetes=KubernetesAuthSettings(enabled=True, audience="engram", api_url=str(kmock.url)),
    )
    async with serve(settings) as running, httpx.AsyncClient() as http:
        resp = await http.post(
            running.mcp_url, json=LIST, headers=HEADERS | {"authorization": f"Bearer {SA_TOKEN}"}
        )
    assert resp.status_code == 403
    assert "ServiceAccount team-b/stranger is not bound" in resp.json()["error_description"]


async def test_a_token_for_another_audience_is_refused(
    kmock: kmock.RawHandler, make_settings: Callable[..., EngramSettings]
) -> None:
    # The API server only vouches for the audiences it was asked about and the token carries.
    kmock[REVIEWS] << review_answer("system:serviceaccount:team-a:bot", ["vault"])
    settings = make_settings(
        permissions=token_config(),
        kubernetes=KubernetesAuthSettings(enabled=True, audience="engram", api_url=str(kmock.url)),
    )
    async with serve(settings) as running, httpx.AsyncClient() as http:
        resp = await http.post(
            running.mcp_url, json=LIST, headers=HEADERS | {"authorization": f"Bearer {SA_TOKEN}"}
        )
    assert resp.status_code == 401


async def test_an_unreachable_api_server_is_503_and_not_cached(
    make_settings: Callable[..., EngramSettings],
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    settings = make_settings(
        permissions=token_config(),
        kubernetes=KubernetesAuthSettings(enabled=True, api_url=url, timeout_s=2),
    )
    async with serve(settings) as running, httpx.AsyncClient() as http:
        headers = HEADERS | {"authorization": f"Bearer {SA_TOKEN}"}
        first = await http.post(running.mcp_url, json=LIST, headers=headers)
        second = await http.post(running.mcp_url, json=LIST, headers=headers)
        metrics = (await http.get(running.metrics_url)).text
    assert first.status_code == 503
    assert first.headers["retry-after"] == "5"
    assert second.status_code == 503
    assert 'engram_auth_failures_total{reason="tokenreview_unavailable"} 2.0' in metrics


async def test_kubernetes_auth_without_a_cluster_configuration_stops_the_start(
    make_settings: Callable[..., EngramSettings],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    app = create_app(
        make_settings(permissions=token_config(), kubernetes=KubernetesAuthSettings(enabled=True))
    )
    with pytest.raises(StartupError, match=r"kubernetes_auth\.enabled: cannot set up"):
        async with app.router.lifespan_context(app):
            raise AssertionError("the app should not have started")

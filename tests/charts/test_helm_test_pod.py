"""The `helm test` pod's command, run as rendered against a real MCP server on loopback.

The server is the MCP SDK's own Streamable HTTP app (the SDK Engram's service is built on)
with five tools named like Engram's, a /readyz route and a bearer-token gate in front.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import helm_python
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.responses import PlainTextResponse

from .rendering import Obj, Rendered, env_value, render

TOOLS = ("mem0_add", "mem0_search", "mem0_get_all", "mem0_status", "mem0_maintenance")
GOOD_TOKEN = "token-of-a-test-pod"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _mcp_app(tools: tuple[str, ...]) -> ASGIApp:
    server = MCPServer("engram-stand-in")
    for name in tools:

        def handler(query: str = "") -> str:
            return query

        server.tool(name=name)(handler)
    app: ASGIApp = server.streamable_http_app()
    return app


def _gated(app: ASGIApp, *, require_token: bool, refuse_as_unbound: int = 0) -> ASGIApp:
    """/readyz answers 200. With require_token, /mcp needs `Bearer GOOD_TOKEN`; the first
    `refuse_as_unbound` calls carrying it get 403, as before the operator's binding arrives."""
    unbound_left = [refuse_as_unbound]

    async def gate(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/readyz":
            await PlainTextResponse("ready")(scope, receive, send)
            return
        if scope["type"] == "http" and require_token:
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {GOOD_TOKEN}".encode():
                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
            if unbound_left[0] > 0:
                unbound_left[0] -= 1
                await PlainTextResponse("not bound", status_code=403)(scope, receive, send)
                return
        await app(scope, receive, send)

    return gate


@dataclass
class LoopbackServer:
    url: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def serve() -> Iterator[Callable[[ASGIApp], LoopbackServer]]:
    running: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: ASGIApp) -> LoopbackServer:
        port = _free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        running.append((server, thread))
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "loopback MCP server did not start"
            time.sleep(0.01)
        return LoopbackServer(url=f"http://127.0.0.1:{port}")

    yield start
    for server, thread in running:
        server.should_exit = True
        thread.join(timeout=10)


def _test_pod(rendered: Rendered) -> Obj:
    pods = [
        p
        for p in rendered.of_kind("Pod")
        if p["metadata"]["annotations"].get("helm.sh/hook") == "test"
    ]
    assert len(pods) == 1
    return pods[0]


def _run_pod_command(pod: Obj, url: str, token_file: str) -> subprocess.CompletedProcess[str]:
    container = pod["spec"]["containers"][0]
    command = list(container["command"])
    assert command[0] == "python"
    env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")},
        "ENGRAM_TEST_URL": url,
        "ENGRAM_TEST_AUTH": env_value(container, "ENGRAM_TEST_AUTH"),
        "ENGRAM_TEST_TOKEN_FILE": token_file,
        # Shorter than in a cluster, where the binding takes a kubelet ConfigMap sync.
        "ENGRAM_TEST_BIND_TIMEOUT_S": "1",
        "ENGRAM_TEST_POLL_S": "0.05",
    }
    return subprocess.run(
        [sys.executable, *command[1:]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def token_file(tmp_path: Any) -> str:
    path = tmp_path / "token"
    path.write_text(GOOD_TOKEN + "\n")
    return str(path)


def test_test_pod_targets_the_mcp_service_with_an_audience_bound_token(
    default_render: Rendered,
) -> None:
    pod = _test_pod(default_render)
    container = pod["spec"]["containers"][0]
    assert env_value(container, "ENGRAM_TEST_URL") == "http://engram.engram.svc:8765"
    assert env_value(container, "ENGRAM_TEST_AUTH") == "kubernetes"
    token_dir = os.path.dirname(env_value(container, "ENGRAM_TEST_TOKEN_FILE"))
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == token_dir)
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    source = volume["projected"]["sources"][0]["serviceAccountToken"]
    assert source["audience"] == "engram"
    assert source["path"] == "token"
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["restartPolicy"] == "Never"
    assert "hook-succeeded" in pod["metadata"]["annotations"]["helm.sh/hook-delete-policy"]


def test_test_pod_waits_for_its_binding_then_lists_the_tools(
    default_render: Rendered, serve: Callable[[ASGIApp], LoopbackServer], token_file: str
) -> None:
    server = serve(_gated(_mcp_app(TOOLS), require_token=True, refuse_as_unbound=3))
    result = _run_pod_command(_test_pod(default_render), server.url, token_file)
    assert result.returncode == 0, result.stderr
    assert "ok: /readyz answered 200" in result.stdout
    assert "refused with 401" in result.stdout
    assert "is bound to an agent" in result.stdout
    assert "ok: tools/list names" in result.stdout


def test_test_pod_gives_up_when_its_binding_never_arrives(
    default_render: Rendered, serve: Callable[[ASGIApp], LoopbackServer], token_file: str
) -> None:
    server = serve(_gated(_mcp_app(TOOLS), require_token=True, refuse_as_unbound=10**6))
    result = _run_pod_command(_test_pod(default_render), server.url, token_file)
    assert result.returncode == 1
    assert "still answers 403 after 1s" in result.stderr


def test_test_pod_binds_its_service_account_through_an_engram_agent(
    default_render: Rendered,
) -> None:
    pod = _test_pod(default_render)
    account = pod["spec"]["serviceAccountName"]
    assert default_render.get("ServiceAccount", account)["automountServiceAccountToken"] is False
    agent = default_render.get("EngramAgent", "engram-helm-test")
    assert agent["spec"]["identity"]["serviceAccounts"] == [
        {"namespace": "engram", "name": account}
    ]
    assert agent["spec"]["read"] == []
    assert agent["spec"]["write"] == []


def test_without_the_operator_the_test_pod_expects_an_unbound_refusal(
    rendered_scenario: Callable[[str], Rendered],
    serve: Callable[[ASGIApp], LoopbackServer],
    token_file: str,
) -> None:
    rendered = rendered_scenario("no-operator-values")
    assert not rendered.of_kind("EngramAgent")
    pod = _test_pod(rendered)
    assert env_value(pod["spec"]["containers"][0], "ENGRAM_TEST_AUTH") == "kubernetes-unbound"
    refusing = serve(_gated(_mcp_app(TOOLS), require_token=True, refuse_as_unbound=10**6))
    result = _run_pod_command(pod, refusing.url, token_file)
    assert result.returncode == 0, result.stderr
    assert "refused it as unbound (403)" in result.stdout
    rejecting = serve(_gated(_mcp_app(TOOLS), require_token=True))
    bad_token = token_file + ".bad"
    with open(bad_token, "w") as handle:
        handle.write("not-the-token")
    result = _run_pod_command(pod, rejecting.url, bad_token)
    assert result.returncode == 1
    assert "answered 401, expected 403" in result.stderr


def test_test_pod_fails_when_a_tool_is_missing(
    default_render: Rendered, serve: Callable[[ASGIApp], LoopbackServer], token_file: str
) -> None:
    server = serve(_gated(_mcp_app(TOOLS[:-1]), require_token=True))
    result = _run_pod_command(_test_pod(default_render), server.url, token_file)
    assert result.returncode == 1
    assert "lacks mem0_maintenance" in result.stderr


def test_test_pod_fails_when_anonymous_callers_get_in(
    default_render: Rendered, serve: Callable[[ASGIApp], LoopbackServer], token_file: str
) -> None:
    server = serve(_gated(_mcp_app(TOOLS), require_token=False))
    result = _run_pod_command(_test_pod(default_render), server.url, token_file)
    assert result.returncode == 1
    assert "expected 401" in result.stderr


def test_test_pod_lists_tools_without_a_token_when_auth_is_off(
    rendered_scenario: Callable[[str], Rendered],
    serve: Callable[[ASGIApp], LoopbackServer],
    token_file: str,
) -> None:
    pod = _test_pod(rendered_scenario("auth-off-insecure-values"))
    assert not [v for v in pod["spec"]["volumes"] if "projected" in v]
    server = serve(_gated(_mcp_app(TOOLS), require_token=False))
    result = _run_pod_command(pod, server.url, token_file)
    assert result.returncode == 0, result.stderr
    assert "refused with 401" not in result.stdout


def test_with_token_auth_only_the_test_pod_checks_that_anonymous_calls_are_refused(
    chart: helm_python.Chart, serve: Callable[[ASGIApp], LoopbackServer], token_file: str
) -> None:
    rendered = render(chart, {"auth": {"kubernetes": {"enabled": False, "audience": "engram"}}})
    pod = _test_pod(rendered)
    assert env_value(pod["spec"]["containers"][0], "ENGRAM_TEST_AUTH") == "token"
    server = serve(_gated(_mcp_app(TOOLS), require_token=True))
    result = _run_pod_command(pod, server.url, token_file)
    assert result.returncode == 0, result.stderr
    assert "tools/list" not in result.stdout


def test_test_pod_fails_when_the_service_is_not_ready(
    default_render: Rendered, serve: Callable[[ASGIApp], LoopbackServer], token_file: str
) -> None:
    async def not_ready(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await PlainTextResponse("starting", status_code=503)(scope, receive, send)

    server = serve(not_ready)
    result = _run_pod_command(_test_pod(default_render), server.url, token_file)
    assert result.returncode == 1
    assert "/readyz answered 503" in result.stderr

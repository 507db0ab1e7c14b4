"""/healthz, /readyz, /metrics, request ids, the request size limit and transport security."""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Callable

import httpx
import pytest
from pydantic import SecretStr

from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.resilience import ResilienceSettings
from engram_api.server.logs import JsonFormatter
from engram_api.settings import EngramSettings, StoreSettings
from tests.engram_api.server.harness import (
    ALPHA_TOKEN,
    RunningServer,
    call,
    call_error,
    serve,
)

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
# /readyz shows its parts only to an agent allowed `status`.
DETAIL = {"authorization": f"Bearer {ALPHA_TOKEN}"}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


async def test_healthz_and_readyz_answer_when_everything_is_up(
    token_server: RunningServer,
) -> None:
    async with httpx.AsyncClient(base_url=token_server.base_url) as http:
        health = await http.get("/healthz")
        ready = await http.get("/readyz", headers=DETAIL)
    assert health.json() == {"status": "ok"}
    body = ready.json()
    assert ready.status_code == 200
    assert body["ready"] is True
    assert body["store"] == {"kind": "embedded", "ready": True}
    assert body["embedder"]["ready"] is True
    assert body["permissions"]["source"].endswith("permissions.yaml")
    assert body["queue"]["depth"] == 0


async def test_readyz_on_a_local_server_says_only_ready_or_not(
    local_server: RunningServer,
) -> None:
    async with httpx.AsyncClient(base_url=local_server.base_url) as http:
        ready = await http.get("/readyz", headers={"authorization": "Bearer anything"})
    assert ready.json() == {"ready": True}


def _down_embedder() -> EmbeddingSettings:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    closed.close()
    return EmbeddingSettings(
        primary=ProviderSettings(
            provider="openai",
            base_url=url,
            api_key=SecretStr("sk-test"),
            model="m",
            dimension=384,
            timeout_s=2,
        ),
        resilience=ResilienceSettings(attempts=1),
    )


async def test_a_down_embedder_queues_writes_degrades_search_and_stays_ready_saying_so(
    make_settings: Callable[..., EngramSettings],
) -> None:
    settings = make_settings(embeddings=_down_embedder())
    async with serve(settings) as running:
        async with running.client() as client:
            queued = await call(client, "mem0_add", content="Written while down", scope="global")
            found = await call(client, "mem0_search", query="written while down")
            status = await call(client, "mem0_status")
        async with httpx.AsyncClient(base_url=running.base_url) as http:
            ready = await http.get("/readyz")
            metrics = (await http.get(running.metrics_url)).text
    assert queued["queued"] is True
    assert queued["write_id"]
    assert found["degraded"] is True
    assert "lexical results only" in found["reason"]
    assert status["queue"]["depth"] == 1
    # Ready means "can accept work": the write above was accepted (queued), so the replica
    # stays in the Service; what is degraded is in the metrics (and the detail, for status).
    assert ready.status_code == 200
    assert ready.json() == {"ready": True}
    assert 'engram_degraded{part="embedder"} 1.0' in metrics
    assert 'engram_degraded{part="store"} 0.0' in metrics
    assert "engram_queue_depth 1.0" in metrics
    assert 'engram_tool_calls_total{outcome="queued",tool="mem0_add"} 1.0' in metrics


async def test_a_down_qdrant_server_keeps_the_replica_ready_and_queues_writes(
    make_settings: Callable[..., EngramSettings],
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there: a Qdrant restart, seen from the MCP service
    settings = make_settings().model_copy(
        update={"store": StoreSettings(mode="server", url=url, timeout_s=1)}
    )
    async with serve(settings) as running:
        async with running.client() as client:
            queued = await call(
                client, "mem0_add", content="Written while Qdrant restarts", scope="global"
            )
        async with httpx.AsyncClient(base_url=running.base_url) as http:
            ready = await http.get("/readyz")
            metrics = (await http.get(running.metrics_url)).text
    assert queued["queued"] is True
    assert ready.status_code == 200
    assert ready.json() == {"ready": True}
    assert 'engram_degraded{part="store"} 1.0' in metrics


async def test_metrics_count_calls_errors_latency_and_memories(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        await call(client, "mem0_add", content="Standup is at nine", scope="group:a")
        await call(
            client,
            "mem0_add",
            content="Prefers short answers",
            scope="global",
            mem_type="preference",
        )
        mem = await call(client, "mem0_add", content="Old VPN host", scope="global")
        await call(client, "mem0_forget", memory_id=mem["id"], reason="outdated")
        await call(client, "mem0_search", query="standup")
        await client.call_tool("mem0_add", {"content": "x", "scope": "all"})
    async with httpx.AsyncClient(base_url=local_server.base_url) as http:
        resp = await http.get(local_server.metrics_url)
    text = resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    assert 'engram_tool_calls_total{outcome="ok",tool="mem0_add"} 3.0' in text
    assert 'engram_tool_calls_total{outcome="invalid_input",tool="mem0_add"} 1.0' in text
    assert 'engram_tool_errors_total{kind="invalid_input",tool="mem0_add"} 1.0' in text
    assert 'engram_tool_duration_seconds_count{tool="mem0_search"} 1.0' in text
    assert 'engram_memories{state="active"} 2.0' in text
    assert 'engram_memories{state="archived"} 1.0' in text
    # Kinds, not names: a scope name says who has memories.
    assert 'engram_memories_by_scope{scope="group:*",state="active"} 1.0' in text
    assert 'engram_memories_by_scope{scope="global",state="active"} 1.0' in text
    assert "group:a" not in text
    assert 'engram_memories_by_type{mem_type="preference",state="active"} 1.0' in text
    assert "engram_queue_depth 0.0" in text


async def test_with_scope_names_opted_in_scopes_past_the_label_limit_are_summed_as_other(
    make_settings: Callable[..., EngramSettings],
) -> None:
    async with serve(make_settings(metrics_max_scopes=2, metrics_scope_labels="name")) as running:
        async with running.client() as client:
            for i, n in enumerate((3, 2, 1)):
                for j in range(n):
                    await call(client, "mem0_add", content=f"note {i}.{j}", scope=f"group:g{i}")
        async with httpx.AsyncClient(base_url=running.base_url) as http:
            text = (await http.get(running.metrics_url)).text
    assert 'engram_memories_by_scope{scope="group:g0",state="active"} 3.0' in text
    assert 'engram_memories_by_scope{scope="group:g1",state="active"} 2.0' in text
    assert 'engram_memories_by_scope{scope="_other",state="active"} 1.0' in text


async def test_a_request_id_is_echoed_or_made_up(local_server: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=local_server.base_url) as http:
        given = await http.get("/healthz", headers={"x-request-id": "trace-42"})
        made = await http.get("/healthz", headers={"x-request-id": "bad id with spaces"})
    assert given.headers["x-request-id"] == "trace-42"
    assert re.fullmatch(r"[0-9a-f]{16}", made.headers["x-request-id"])


async def test_each_tool_call_logs_one_line_with_request_id_and_agent_but_no_content(
    local_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="engram_api.server.calls")
    secret_ish = "Sensitive-detail-zebra-17"
    async with local_server.client() as client:
        await call(
            client, "mem0_add", content=f"Remember {secret_ish}", scope="global", agent="devops"
        )
        await call(client, "mem0_search", query=secret_ish)
        # Text pasted into the wrong argument is refused and not echoed into the log.
        await call_error(client, "mem0_add", content="x", scope=f"note: {secret_ish}")
    lines = [r for r in caplog.records if r.getMessage() == "tool call"]
    assert [r.__dict__["tool"] for r in lines] == ["mem0_add", "mem0_search", "mem0_add"]
    records = [json.loads(JsonFormatter().format(r)) for r in lines]
    for data in records:
        assert re.fullmatch(r"[0-9a-f]{16}", data["request_id"])
        assert data["duration_ms"] >= 0
    assert [d["agent"] for d in records] == ["devops", "main", "main"]
    assert [d["outcome"] for d in records] == ["ok", "ok", "invalid_input"]
    assert [d.get("scope") for d in records] == ["global", "global", "(invalid)"]
    assert all(secret_ish not in r.getMessage() for r in caplog.records)
    assert all(
        secret_ish not in json.dumps(r.__dict__, default=str)
        for r in caplog.records
        if r.levelno >= logging.INFO
    )


async def test_an_oversized_request_is_refused_with_413(
    make_settings: Callable[..., EngramSettings],
) -> None:
    async with serve(make_settings(max_request_bytes=4096)) as running:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "mem0_add", "arguments": {"content": "x" * 5000, "scope": "global"}},
        }
        async with httpx.AsyncClient() as http:
            resp = await http.post(running.mcp_url, json=body, headers=HEADERS)
            small = await http.post(running.mcp_url, json=LIST, headers=HEADERS)
    assert resp.status_code == 413
    assert small.status_code == 200


async def test_a_loopback_server_refuses_foreign_host_and_origin_headers(
    local_server: RunningServer,
) -> None:
    async with httpx.AsyncClient() as http:
        host = await http.post(
            local_server.mcp_url, json=LIST, headers=HEADERS | {"host": "evil.example:80"}
        )
        origin = await http.post(
            local_server.mcp_url, json=LIST, headers=HEADERS | {"origin": "https://evil.example"}
        )
        ok = await http.post(
            local_server.mcp_url, json=LIST, headers=HEADERS | {"origin": "http://localhost:3000"}
        )
    assert host.status_code == 421
    assert origin.status_code == 403
    assert ok.status_code == 200


async def test_allowed_hosts_from_settings_are_accepted(
    make_settings: Callable[..., EngramSettings],
) -> None:
    settings = make_settings(allowed_hosts=["engram.internal:*"])
    async with serve(settings) as running, httpx.AsyncClient() as http:
        named = await http.post(
            running.mcp_url, json=LIST, headers=HEADERS | {"host": "engram.internal:8765"}
        )
        other = await http.post(
            running.mcp_url, json=LIST, headers=HEADERS | {"host": "other.internal:8765"}
        )
    assert named.status_code == 200
    assert other.status_code == 421


async def test_metrics_label_dm_scopes_by_kind_and_cache_the_counts(
    make_settings: Callable[..., EngramSettings],
) -> None:
    async with serve(make_settings(metrics_cache_s=3600)) as local_server:
        await _kinds_and_cache(local_server)


async def _kinds_and_cache(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        await call(client, "mem0_add", content="shared inbox note", scope="dm")
        await call(client, "mem0_add", content="alice likes tea", scope="dm:alice")
        await call(client, "mem0_add", content="bob likes coffee", scope="dm:bob")
        await call(client, "mem0_add", content="own note", scope="agent:devops", agent="devops")
    async with httpx.AsyncClient() as http:
        text = (await http.get(local_server.metrics_url)).text
        async with local_server.client() as client:
            await call(client, "mem0_add", content="carol likes juice", scope="dm:carol")
        cached = (await http.get(local_server.metrics_url)).text
    assert 'engram_memories_by_scope{scope="dm",state="active"} 1.0' in text
    assert 'engram_memories_by_scope{scope="dm:*",state="active"} 2.0' in text
    assert 'engram_memories_by_scope{scope="agent:*",state="active"} 1.0' in text
    assert "alice" not in text
    assert "devops" not in text
    # Within metrics_cache_s a scrape reuses the counts instead of querying the store again.
    assert 'engram_memories_by_scope{scope="dm:*",state="active"} 2.0' in cached

"""Bad tool arguments get our own message (field and rule), a log line and a metric; invalid
text is a clear error; GET /mcp is refused in stateless mode."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from engram_api.memory.model import BAD_TEXT_RULE
from engram_api.server.calls import ToolRuntime
from engram_api.server.metrics import Metrics
from engram_api.server.tools import build_mcp
from tests.engram_api.server.harness import RunningServer

HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


async def rpc(server: RunningServer, tool: str, arguments: Any) -> dict[str, Any]:
    """One raw tools/call, so arguments can be anything JSON can carry."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    async with httpx.AsyncClient() as http:
        # ASCII JSON: a lone surrogate travels as a \ud800 escape, as a client would send it.
        resp = await http.post(server.mcp_url, content=json.dumps(body), headers=HEADERS)
    assert resp.status_code == 200, resp.text
    result: dict[str, Any] = resp.json()["result"]
    return result


def _text(result: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in result["content"])


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("mem0_search", {"query": "x", "limit": "five"}, "limit: must be an integer"),
        ("mem0_search", {"query": ["a", "list"]}, "query: must be a string"),
        ("mem0_add", {"content": 42, "scope": "global"}, "content: must be a string"),
        ("mem0_add", {"scope": "global"}, "content: is required"),
        ("mem0_get_all", {"include_archived": "maybe"}, "include_archived: must be true or false"),
        ("mem0_forget", {"memory_id": {"id": 1}, "reason": "r"}, "memory_id: must be a string"),
    ],
)
async def test_a_wrong_type_argument_gets_our_message_naming_the_field_and_rule(
    local_server: RunningServer, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    result = await rpc(local_server, tool, arguments)
    assert result["isError"] is True
    text = _text(result)
    assert text.startswith(expected), text
    assert text.endswith("(invalid_input)")
    assert "pydantic" not in text
    assert "Error executing tool" not in text


async def test_a_bad_argument_is_logged_and_counted(
    local_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="engram_api.server.calls")
    await rpc(local_server, "mem0_search", {"query": "x", "limit": "secret-looking-five"})
    lines = [r for r in caplog.records if r.getMessage() == "tool call"]
    assert [(r.__dict__["tool"], r.__dict__["outcome"]) for r in lines] == [
        ("mem0_search", "invalid_input")
    ]
    assert "secret-looking-five" not in str(lines[0].__dict__)
    assert (
        local_server.app.state.engram.metrics.tool_errors.labels(
            tool="mem0_search", kind="invalid_input"
        )._value.get()
        == 1
    )


INVALID_TEXT = [
    ("mem0_add", {"content": "lone \ud800 surrogate", "scope": "global"}, "content"),
    ("mem0_add", {"content": "ok", "scope": "global", "context": "\udfff"}, "context"),
    ("mem0_search", {"query": "nul \x00 inside"}, "query"),
    ("mem0_forget", {"memory_id": "x", "reason": "bye \udc80"}, "reason"),
    ("mem0_get_all", {"scope": "dm:\ud83d"}, "scope"),
    ("mem0_search", {"query": "ok", "\ud800": "x"}, "(argument name)"),
]


@pytest.mark.parametrize(("tool", "arguments", "field"), INVALID_TEXT)
async def test_invalid_text_in_any_string_argument_is_a_clear_tool_error(
    tool: str, arguments: dict[str, Any], field: str
) -> None:
    # In process (and over stdio) the arguments reach the server as Python strings.
    mcp = build_mcp(ToolRuntime(metrics=Metrics(), transport="stdio"))
    with pytest.raises(ToolError) as raised:
        await mcp.call_tool(tool, arguments)
    assert str(raised.value) == f"{field}: {BAD_TEXT_RULE} (invalid_input)"


async def test_a_lone_surrogate_over_http_is_a_json_rpc_parse_error_not_a_crash(
    local_server: RunningServer,
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "mem0_add", "arguments": {"content": "a \ud800 b", "scope": "global"}},
    }
    async with httpx.AsyncClient() as http:
        resp = await http.post(local_server.mcp_url, content=json.dumps(body), headers=HEADERS)
        health = await http.get(local_server.base_url + "/healthz")
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == -32700
    assert (
        "surrogate" in resp.json()["error"]["message"]
        or "escape" in resp.json()["error"]["message"]
    )
    assert health.status_code == 200


async def test_get_on_the_mcp_endpoint_is_refused_in_stateless_mode(
    local_server: RunningServer,
) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        resp = await http.get(local_server.mcp_url, headers={"accept": "text/event-stream"})
    assert resp.status_code == 405
    assert resp.headers["allow"] == "POST"

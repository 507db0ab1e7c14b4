"""A bounded fuzz run through the real MCP app: 10,000 tool calls with arguments of every
wrong shape, as a token-authenticated agent with narrow rights, then two checks: no call
ended in an unhandled error, and no memory the fuzzer may not write changed.

In process (httpx's ASGI transport with the app's own lifespan) rather than over a socket:
the same app, auth and MCP stack, at a fraction of the cost per call. Seeded: a failure
reproduces. The store and embedder are the fast ones (embedded store, hashing embedder).
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections.abc import Callable
from typing import Any, Final

import httpx
import pytest

from engram_api.settings import EngramSettings
from engram_api.store.base import Match, MemoryStore
from engram_contract.permissions import AgentPolicy, Operation, PermissionConfig, Trust, hash_token
from tests import policy_model as model

CALLS: Final = 10_000
OWNER_TOKEN = "engram_owner-token-for-fuzzing-0123456789"
FUZZER_TOKEN = "engram_fuzzer-token-for-fuzzing-0123456789"
FUZZER = AgentPolicy(
    read=["global", "group:*", "dm:*", "agent:fuzzer"],
    write=["group:fuzz", "agent:fuzzer"],
    operations=[
        Operation.add,
        Operation.search,
        Operation.get_all,
        Operation.status,
        Operation.forget,
    ],
    max_trust=Trust.medium,
    token_sha256=[hash_token(FUZZER_TOKEN)],
)
CONFIG = PermissionConfig(
    agents={
        "owner": AgentPolicy(
            read=["global", "dm", "dm:*", "group:*", "agent:*"],
            write=["global", "dm", "dm:*", "group:*", "agent:*"],
            operations=list(Operation),
            max_trust=Trust.high,
            token_sha256=[hash_token(OWNER_TOKEN)],
        ),
        "fuzzer": FUZZER,
    }
)
SEED_SCOPES = ["global", "dm", "dm:alice", "group:other", "group:fuzz", "agent:owner"]
TOOLS = [
    "mem0_add",
    "mem0_search",
    "mem0_get_all",
    "mem0_status",
    "mem0_forget",
    "mem0_maintenance",
]
PARAMS = {
    "mem0_add": ["content", "scope", "mem_type", "source", "trust", "context", "agent"],
    "mem0_search": ["query", "scope", "mem_type", "trust_min", "limit", "agent"],
    "mem0_get_all": ["scope", "mem_type", "cursor", "limit", "include_archived", "agent"],
    "mem0_status": ["agent"],
    "mem0_forget": ["memory_id", "reason", "agent"],
    "mem0_maintenance": ["mode", "dry_run", "agent"],
}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
    "authorization": f"Bearer {FUZZER_TOKEN}",
}
WRONG_TYPES: Final[list[Any]] = [
    0,
    -1,
    1,
    51,
    201,
    10**20,
    1.5,
    float("1e308"),
    True,
    False,
    None,
    [],
    {},
    ["global"],
    {"scope": "global"},
    [[[]]],
]
TEXTS: Final = [
    "",
    " ",
    "\t\n",
    "the deploy runs at noon",
    "记忆 部署在中午",
    "🚀 emoji",
    "nul \x00 inside",
    "ctrl \x07\x1b[31m",
    "x" * 9000,
    "y" * 2100,
    "'; DROP TABLE memories; --",
    "../../etc/passwd",
    "{{7*7}}",
    "%s%s%n",
    "\u202egnp.exe",
    "a\u200bb",
    "NaN",
    "null",
    "true",
    "-1",
]
SCOPES: Final = [
    "global",
    "dm",
    "dm:alice",
    "dm:*",
    "group:fuzz",
    "group:other",
    "group:*",
    "agent:fuzzer",
    "agent:owner",
    "all",
    "cross:fuzz",
    "cross:other",
    "cross:",
    "cross:*",
    "group:",
    "dm:",
    "agent:" + "a" * 200,
    "GLOBAL",
    " global ",
    "global\x00",
]
WORDS: Final = [
    "fact",
    "preference",
    "task_log",
    "knowledge",
    "high",
    "low",
    "medium",
    "user_direct",
    "agent_output",
    "report_only",
    "daily",
    "weekly",
    "fuzzer",
    "owner",
    "FACT",
    "fuzzer ",
]


def _value(rng: random.Random, param: str, ids: list[str]) -> Any:
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(WRONG_TYPES)
    if param in ("scope",):
        return rng.choice(SCOPES)
    if param in ("memory_id", "cursor"):
        return rng.choice([*ids, str(uuid.uuid4()), "not-a-uuid", "", ids[0].upper()])
    if param in ("limit",):
        return rng.choice([1, 5, 50, 200, 0, -5, 1000, "5"])
    if param in ("include_archived", "dry_run"):
        return rng.choice([True, False, "yes", 1])
    if param in ("mem_type", "source", "trust", "trust_min", "mode", "agent"):
        return rng.choice([*WORDS, *TEXTS[:3]])
    return rng.choice(TEXTS) if roll < 0.8 else f"fuzz note {rng.randrange(10**6)}"


def generate(rng: random.Random, ids: list[str]) -> tuple[str, Any]:
    tool = rng.choice(TOOLS) if rng.random() > 0.01 else "mem0_nope"
    if rng.random() < 0.02:
        return tool, rng.choice([[], "args", 7, None])
    args: dict[str, Any] = {}
    for param in PARAMS.get(tool, ["content"]):
        if rng.random() < 0.7:
            args[param] = _value(rng, param, ids)
    if rng.random() < 0.05:
        args[rng.choice(["extra", "user_id", "__proto__"])] = rng.choice(TEXTS)
    return tool, args


def _fixed(payload: dict[str, Any]) -> dict[str, Any]:
    # Reads bump access counts: bookkeeping, not a change to the memory.
    return {k: v for k, v in payload.items() if k not in ("access_count", "last_accessed_at")}


async def _snapshot(store: MemoryStore) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    offset: str | None = None
    while True:
        points, offset = await store.scroll(Match(archived=None), limit=500, offset=offset)
        out.update({p.id: _fixed(p.payload) for p in points})
        if offset is None:
            return out


async def test_10k_fuzzed_tool_calls_raise_nothing_unhandled_and_change_nothing_unwritable(
    make_settings: Callable[..., EngramSettings], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    app_settings = make_settings(permissions=CONFIG)
    from engram_api.server.app import create_app

    app = create_app(app_settings)
    fuzzer = model.Policy(read=tuple(FUZZER.read), write=tuple(FUZZER.write))
    rng = random.Random(15)
    unhandled: list[tuple[str, Any, str]] = []
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765"
        ) as http,
    ):
        store = app.state.engram.engine.store

        async def post(tool: str, arguments: Any, token: str = FUZZER_TOKEN) -> httpx.Response:
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
            return await http.post(
                "/mcp",
                content=json.dumps(body),
                headers=HEADERS | {"authorization": f"Bearer {token}"},
            )

        ids: list[str] = []
        for n, scope in enumerate(SEED_SCOPES * 3):
            resp = await post(
                "mem0_add",
                {"content": f"seed {n} in {scope}", "scope": scope, "context": f"seed ctx {n}"},
                OWNER_TOKEN,
            )
            ids.append(resp.json()["result"]["structuredContent"]["id"])
        before = await _snapshot(store)

        for _ in range(CALLS):
            tool, arguments = generate(rng, ids)
            resp = await post(tool, arguments)
            if resp.status_code >= 500:
                unhandled.append((tool, arguments, resp.text))
                continue
            data = resp.json()
            text = json.dumps(data.get("result", {}).get("content", ""))
            if "internal error" in text or "Error executing tool" in text:
                unhandled.append((tool, arguments, text))
        after = await _snapshot(store)

    assert unhandled == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    protected = {i: p for i, p in before.items() if not model.may_write(fuzzer, p["scope"])}
    assert {i: after.get(i) for i in protected} == protected
    added = {i for i in after if i not in before}
    assert all(model.may_write(fuzzer, after[i]["scope"]) for i in added)

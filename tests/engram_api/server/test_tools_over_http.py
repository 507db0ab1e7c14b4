"""Every tool through the real app over streamable HTTP, in local mode (built-in agents)."""

from __future__ import annotations

import importlib.util
import uuid

import pytest

from tests.engram_api.server.harness import RunningServer, call, call_error

FAKE_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3


async def test_tools_are_listed_with_descriptions_and_read_only_or_destructive_hints(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "mem0_add",
        "mem0_search",
        "mem0_get_all",
        "mem0_status",
        "mem0_maintenance",
        "mem0_forget",
    }
    for tool in tools.values():
        assert tool.description
        assert "\n        " not in tool.description
        assert tool.annotations is not None
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    hints = {name: tool.annotations for name, tool in tools.items()}
    for name in ("mem0_search", "mem0_get_all", "mem0_status"):
        assert getattr(hints[name], "read_only_hint", None) is True
    assert getattr(hints["mem0_forget"], "destructive_hint", None) is True
    assert getattr(hints["mem0_maintenance"], "destructive_hint", None) is True
    assert getattr(hints["mem0_add"], "read_only_hint", None) is False
    assert getattr(hints["mem0_add"], "destructive_hint", None) is False
    # Prototype parameter names and defaults, so existing prompts keep working.
    add = tools["mem0_add"].input_schema
    assert add["required"] == ["content", "scope"]
    assert add["properties"]["source"]["default"] == "agent_output"
    assert add["properties"]["trust"]["default"] == "medium"
    search = tools["mem0_search"].input_schema["properties"]
    assert search["scope"]["default"] == "global"
    assert search["limit"]["default"] == 5
    assert tools["mem0_maintenance"].input_schema["properties"]["mode"]["default"] == "report_only"
    get_all = tools["mem0_get_all"].input_schema["properties"]
    assert "user_id" not in get_all
    assert {"cursor", "limit"} <= set(get_all)


async def test_add_then_search_finds_the_memory_with_scopes_echoed(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        stored = await call(
            client,
            "mem0_add",
            content="The staging cluster runs Kubernetes 1.31",
            scope="group:platform",
            mem_type="fact",
        )
        assert stored["status"] == "stored"
        assert stored["memory"]["agent"] == "main"
        found = await call(
            client, "mem0_search", query="staging cluster kubernetes", scope="group:platform"
        )
    assert found["scopes_searched"] == ["group:platform", "global"]
    assert [r["id"] for r in found["results"]] == [stored["id"]]
    assert found["results"][0]["content"] == "The staging cluster runs Kubernetes 1.31"


async def test_adding_the_same_text_twice_answers_duplicate(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        first = await call(client, "mem0_add", content="Tea, no sugar", scope="global")
        second = await call(client, "mem0_add", content="Tea, no sugar", scope="global")
    assert second["status"] == "duplicate"
    assert second["id"] == first["id"]


async def test_local_mode_trusts_the_agent_argument(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        out = await call(
            client,
            "mem0_add",
            content="Rotate the on-call pager weekly",
            scope="agent:x",
            agent="devops",
        )
        assert out["memory"]["agent"] == "devops"
        denied = await call_error(
            client, "mem0_add", content="Rotate the on-call pager weekly", scope="agent:x"
        )
    assert "scope: agent 'main' cannot write to scope 'agent:x'" in denied


async def test_unknown_agent_can_only_search_global(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        await call(client, "mem0_add", content="Office closes at six", scope="global")
        found = await call(client, "mem0_search", query="office closes", agent="stranger")
        assert len(found["results"]) == 1
        add = await call_error(
            client, "mem0_add", content="x marks the spot", scope="global", agent="stranger"
        )
        listing = await call_error(client, "mem0_get_all", agent="stranger")
    assert "agent 'stranger' is not allowed the 'add' operation" in add
    assert "(permission_denied)" in add
    assert "'get_all' operation" in listing


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"content": "a", "scope": "all"}, "scope: 'all' and 'cross:<group-id>' are search-only"),
        ({"content": "a", "scope": "group:"}, "scope: must be 'global'"),
        ({"content": "a", "scope": "global", "mem_type": "gossip"}, "mem_type: must be one of"),
        ({"content": "a", "scope": "global", "trust": "absolute"}, "trust: must be one of"),
        ({"content": "  ", "scope": "global"}, "content: must not be empty"),
        ({"content": "x" * 9000, "scope": "global"}, "content: must be at most 8000"),
        ({"content": "a", "scope": "global", "agent": "bad name!"}, "agent: must be 1-128"),
        ({"content": f"deploy key {FAKE_KEY}", "scope": "global"}, "content: looks like"),
        ({"content": "ok", "scope": "global", "context": f"key={FAKE_KEY}"}, "context: looks"),
        ({"scope": "global"}, "content"),
    ],
)
async def test_add_rejects_bad_input_naming_the_field(
    local_server: RunningServer, arguments: dict[str, str], expected: str
) -> None:
    async with local_server.client() as client:
        message = await call_error(client, "mem0_add", **arguments)
        listing = await call(client, "mem0_get_all", include_archived=True)
    assert expected in message
    assert FAKE_KEY not in message
    assert listing["total"] == 0


async def test_user_direct_source_needs_the_right_and_trust_is_capped(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        denied = await call_error(
            client,
            "mem0_add",
            content="User likes jazz",
            scope="global",
            source="user_direct",
            agent="newbie",
        )
        ok = await call(
            client, "mem0_add", content="User likes jazz", scope="global", source="user_direct"
        )
    assert "agent 'newbie'" in denied
    assert ok["memory"]["source"] == "user_direct"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "x", "limit": 0}, "limit: must be an integer from 1 to 50"),
        ({"query": "x", "scope": "cross:"}, "scope: cross:<group-id> needs a group id"),
        ({"query": "x", "scope": "planet:mars"}, "scope: must be 'global'"),
        ({"query": "x", "trust_min": "very"}, "trust_min: must be one of"),
        ({"query": "x", "mem_type": "rumour"}, "mem_type: must be one of"),
        ({"query": ""}, "query: must not be empty"),
        ({"query": "x", "scope": "agent:devops", "agent": "stranger"}, "cannot read scope"),
    ],
)
async def test_search_rejects_bad_input_naming_the_field(
    local_server: RunningServer, arguments: dict[str, object], expected: str
) -> None:
    async with local_server.client() as client:
        message = await call_error(client, "mem0_search", **arguments)
    assert expected in message


async def test_search_filters_by_type_and_trust(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        await call(
            client,
            "mem0_add",
            content="Prefers vim keybindings",
            scope="global",
            mem_type="preference",
            trust="high",
        )
        await call(
            client,
            "mem0_add",
            content="Vim was released in 1991",
            scope="global",
            mem_type="fact",
            trust="low",
        )
        prefs = await call(client, "mem0_search", query="vim", mem_type="preference")
        trusted = await call(client, "mem0_search", query="vim", trust_min="medium")
        prototype_style = await call(
            client, "mem0_search", query="vim", mem_type="", trust_min="", limit=5
        )
    assert [r["mem_type"] for r in prefs["results"]] == ["preference"]
    assert [r["trust"] for r in trusted["results"]] == ["high"]
    assert prototype_style["count"] == 2


async def test_get_all_pages_with_a_cursor_until_the_end(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        ids = set()
        for i in range(5):
            out = await call(client, "mem0_add", content=f"Fact number {i}", scope="group:g")
            ids.add(out["id"])
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await call(client, "mem0_get_all", scope="group:g", limit=2, cursor=cursor)
            assert page["total"] == 5
            seen += [r["id"] for r in page["results"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert pages == 3
    assert set(seen) == ids
    assert len(seen) == 5


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"cursor": "not-a-cursor"}, "cursor: must be a memory id"),
        ({"limit": 1000}, "limit: must be an integer from 1 to 200"),
        ({"scope": "cross:x"}, "scope: 'all' and 'cross:<group-id>' are search-only"),
        ({"scope": "agent:devops", "agent": "stranger"}, "operation"),
    ],
)
async def test_get_all_rejects_bad_input_naming_the_field(
    local_server: RunningServer, arguments: dict[str, object], expected: str
) -> None:
    async with local_server.client() as client:
        message = await call_error(client, "mem0_get_all", **arguments)
    assert expected in message


async def test_status_counts_only_what_the_agent_may_read(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        await call(client, "mem0_add", content="Team standup at 9", scope="group:a")
        await call(client, "mem0_add", content="My own note", scope="agent:ops", agent="devops")
        status = await call(client, "mem0_status")
        denied = await call_error(client, "mem0_status", agent="stranger")
    assert status["agent"] == "main"
    assert status["store"]["ready"] is True
    assert status["active_memories"] == 2
    assert status["by_scope"] == {"group:a": 1, "agent:ops": 1}
    assert status["queue"]["depth"] == 0
    assert "'status' operation" in denied


async def test_forget_archives_and_search_no_longer_finds_it(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        mem = await call(client, "mem0_add", content="The VPN endpoint is vpn1", scope="global")
        out = await call(
            client, "mem0_forget", memory_id=mem["id"], reason="outdated: moved to vpn2"
        )
        again = await call(client, "mem0_forget", memory_id=mem["id"], reason="again")
        found = await call(client, "mem0_search", query="VPN endpoint")
        archived = await call(client, "mem0_get_all", include_archived=True)
    assert out == {
        "status": "archived",
        "id": mem["id"],
        "archived_reason": "outdated: moved to vpn2",
    }
    assert again["status"] == "already_archived"
    assert found["results"] == []
    assert archived["results"][0]["archived"] is True


async def test_forget_errors_name_the_field(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        mine = await call(
            client,
            "mem0_add",
            content="Ops runbook lives in wiki",
            scope="agent:ops",
            agent="devops",
        )
        bad_id = await call_error(client, "mem0_forget", memory_id="nope", reason="x")
        missing = await call_error(client, "mem0_forget", memory_id=str(uuid.uuid4()), reason="x")
        no_reason = await call_error(client, "mem0_forget", memory_id=mine["id"], reason=" ")
        not_writable = await call_error(client, "mem0_forget", memory_id=mine["id"], reason="x")
    assert "id: must be a memory id" in bad_id
    assert "(not_found)" in missing
    assert "reason: must not be empty" in no_reason
    assert "id: agent 'main' cannot change memories in scope 'agent:ops'" in not_writable


async def test_maintenance_report_only_says_when_there_are_no_reports(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        out = await call(client, "mem0_maintenance")
        bad_mode = await call_error(client, "mem0_maintenance", mode="hourly")
        stranger = await call_error(client, "mem0_maintenance", agent="stranger")
    assert out["mode"] == "report_only"
    assert out["reports"] == []
    assert "no maintenance reports exist yet" in out["message"]
    assert "mode: must be one of: report_only, daily, weekly" in bad_mode
    assert "'status' operation" in stranger


async def test_running_maintenance_needs_the_maintenance_permission(
    local_server: RunningServer,
) -> None:
    async with local_server.client() as client:
        denied = await call_error(client, "mem0_maintenance", mode="daily")
        result = await client.call_tool(
            "mem0_maintenance", {"mode": "daily", "dry_run": True, "agent": "devops"}
        )
    assert "mode: running daily maintenance needs the 'maintenance' permission" in denied
    if importlib.util.find_spec("engram_api.maintenance.runner") is None:
        # The maintenance runner is a separate piece; until it ships the tool says so.
        assert result.is_error
        assert "not available yet" in result.content[0].text  # type: ignore[union-attr]
    else:
        assert not result.is_error
        assert result.structured_content is not None
        assert result.structured_content["dry_run"] is True


async def test_legacy_handshake_clients_get_the_same_tools(local_server: RunningServer) -> None:
    async with local_server.client(mode="legacy") as client:
        out = await call(client, "mem0_add", content="Legacy clients work", scope="global")
        found = await call(client, "mem0_search", query="legacy clients")
    assert found["results"][0]["id"] == out["id"]


@pytest.mark.skipif(
    importlib.util.find_spec("engram_api.maintenance.runner") is None,
    reason="the maintenance runner ships separately",
)
async def test_report_only_returns_the_report_of_a_run(local_server: RunningServer) -> None:
    async with local_server.client() as client:
        await call(client, "mem0_add", content="Something to maintain", scope="global")
        await call(client, "mem0_maintenance", mode="daily", dry_run=True, agent="devops")
        out = await call(client, "mem0_maintenance")
    assert out["count"] >= 1
    assert out["reports"][0]["task"] == "daily"
    assert out["reports"][0]["dry_run"] is True
    assert "message" not in out

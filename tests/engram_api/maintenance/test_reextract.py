"""Re-extraction through the real OpenAI-compatible provider against a loopback fake."""

from __future__ import annotations

import json

import pytest

from engram_api.maintenance.runner import run_maintenance
from engram_api.runtime import Engine
from tests.engram_api.maintenance.helpers import (
    FakeChat,
    active,
    add,
    assert_same_memories,
    days_ago,
    payload,
    snapshot,
)

COMPOUND = "We moved CI to GitHub Actions; the user wants PR summaries in German"


def split(user: str) -> str:
    return json.dumps(
        {
            "statements": [
                {"content": "CI runs on GitHub Actions.", "mem_type": "fact"},
                {"content": "The user wants PR summaries in German.", "mem_type": "preference"},
            ]
        }
    )


async def test_todays_memory_is_rewritten_into_atomic_statements_in_the_same_scope(
    engine: Engine, chat: FakeChat
) -> None:
    chat.handlers["reextract"] = split
    original = await add(
        engine, COMPOUND, scope="group:team", trust="high", source="user_direct", context="standup"
    )
    old = await add(engine, "An old memory from last month", created_at=days_ago(30))

    report = await run_maintenance(engine, "daily", llm=chat.llm())

    step = next(s for s in report.steps if s.name == "reextract")
    assert step.status == "ok"
    assert step.counts["created"] == 2
    new = {i: p for i, p in (await active(engine)).items() if i not in (old,)}
    assert sorted(p["content"] for p in new.values()) == [
        "CI runs on GitHub Actions.",
        "The user wants PR summaries in German.",
    ]
    for p in new.values():
        assert (p["scope"], p["trust"], p["source"], p["agent"]) == (
            "group:team",
            "high",
            "user_direct",
            "main",
        )
        assert (p["derived_from"], p["derived_by"], p["context"]) == (
            [original],
            "reextract",
            "standup",
        )
    gone = await payload(engine, original)
    assert gone["archived"] == 1
    assert gone["archived_reason"] == "reextracted"
    assert gone["superseded_by"] in new
    assert sorted(gone["reextracted_into"]) == sorted(new)
    # Only the memory from today's window was sent; a second run sends nothing more.
    assert len(chat.prompts["reextract"]) == 1
    await run_maintenance(engine, "daily", llm=chat.llm())
    assert len(chat.prompts["reextract"]) == 1


async def test_trust_is_capped_for_the_original_agent(engine: Engine, chat: FakeChat) -> None:
    # devops may write agent:* scopes; the new statements keep the original's medium trust
    # even though devops could claim high.
    chat.handlers["reextract"] = split
    await add(engine, COMPOUND, scope="agent:ci", agent="devops", trust="medium")
    await run_maintenance(engine, "daily", llm=chat.llm())
    trusts = {(p["trust"], p["agent"], p["scope"]) for p in (await active(engine)).values()}
    assert trusts == {("medium", "devops", "agent:ci")}


@pytest.mark.parametrize(
    "answer",
    [
        "Sure! Here are the statements: CI runs on GitHub Actions.",
        '{"statements": [{"content": "x", "mem_type": "gossip"}]}',
        '{"statements": [{"content": "x", "mem_type": "fact", "trust": "high"}]}',
        '{"statements": []}',
        '["CI runs on GitHub Actions."]',
        '{"statements": [{"content": "x", "mem_type": "fact"}',
    ],
    ids=["prose", "unknown-type", "extra-key", "empty", "not-an-object", "truncated-json"],
)
async def test_an_invalid_answer_changes_nothing(
    engine: Engine, chat: FakeChat, answer: str
) -> None:
    chat.handlers["reextract"] = lambda user: answer
    await add(engine, COMPOUND)
    before = await snapshot(engine)
    report = await run_maintenance(engine, "daily", llm=chat.llm())
    assert_same_memories(await snapshot(engine), before)
    step = next(s for s in report.steps if s.name == "reextract")
    assert len(step.errors) == 1
    assert "left unchanged" in step.errors[0]
    assert COMPOUND not in json.dumps(report.to_dict())


async def test_a_statement_holding_a_secret_is_refused_and_the_original_kept(
    engine: Engine, chat: FakeChat
) -> None:
    chat.handlers["reextract"] = lambda user: json.dumps(
        {
            "statements": [
                {"content": "CI runs on GitHub Actions.", "mem_type": "fact"},
                {"content": "The deploy password: hunter2hunter2", "mem_type": "fact"},
            ]
        }
    )
    original = await add(engine, COMPOUND)
    before = await snapshot(engine)
    report = await run_maintenance(engine, "daily", llm=chat.llm())
    assert_same_memories(await snapshot(engine), before)
    assert (await payload(engine, original))["archived"] == 0
    err = next(s for s in report.steps if s.name == "reextract").errors[0]
    assert "credential" in err
    assert "hunter2" not in err


async def test_an_already_atomic_memory_is_kept_and_not_sent_again(
    engine: Engine, chat: FakeChat
) -> None:
    chat.handlers["reextract"] = lambda user: json.dumps(
        {"statements": [{"content": "The user is vegetarian.", "mem_type": "fact"}]}
    )
    mid = await add(engine, "The user is vegetarian.")
    await run_maintenance(engine, "daily", llm=chat.llm())
    await run_maintenance(engine, "daily", llm=chat.llm())
    assert list(await active(engine)) == [mid]
    assert len(chat.prompts["reextract"]) == 1


async def test_without_an_llm_the_step_is_skipped_with_the_reason(engine: Engine) -> None:
    await add(engine, COMPOUND)
    before = await snapshot(engine)
    report = await run_maintenance(engine, "daily")
    step = next(s for s in report.steps if s.name == "reextract")
    assert step.status == "skipped"
    assert "no LLM configured" in step.reason
    assert step.counts["candidates"] == 1
    assert report.summary().skipped_steps == ["reextract"]
    assert_same_memories(await snapshot(engine), before)

"""Conflicts: the LLM says how two memories relate; the type's policy picks the winner."""

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

DARK = "The user prefers dark mode in every editor"
LIGHT = "The user prefers light mode in every editor"


def verdict(v: str, confidence: str = "high") -> str:
    return json.dumps({"verdict": v, "confidence": confidence, "reason": "same setting"})


async def test_preference_conflict_keeps_the_newest(engine: Engine, chat: FakeChat) -> None:
    chat.handlers["conflicts"] = lambda user: verdict("contradiction")
    old = await add(engine, DARK, mem_type="preference", created_at=days_ago(10))
    new = await add(engine, LIGHT, mem_type="preference", created_at=days_ago(1))

    report = await run_maintenance(engine, "weekly", llm=chat.llm())

    loser = await payload(engine, old)
    assert (loser["archived"], loser["superseded_by"]) == (1, new)
    assert loser["archived_reason"] == f"conflict: contradicted by {new} (update_latest)"
    assert loser["conflict_reason"] == "same setting"
    assert report.summary().conflicts == 1
    [prompt] = chat.prompts["conflicts"]
    assert DARK in prompt
    assert LIGHT in prompt


async def test_fact_conflict_keeps_higher_trust_then_user_direct_then_newest(
    engine: Engine, chat: FakeChat
) -> None:
    chat.handlers["conflicts"] = lambda user: verdict("contradiction", "medium")
    trusted_old = await add(
        engine, "The staging database is PostgreSQL 15", trust="high", created_at=days_ago(30)
    )
    newer = await add(
        engine, "The staging database is MySQL 8", trust="medium", created_at=days_ago(1)
    )
    direct_old = await add(
        engine,
        "Alice owns the billing service",
        scope="group:x",
        source="user_direct",
        created_at=days_ago(9),
    )
    agent_new = await add(
        engine, "Bob owns the billing service", scope="group:x", created_at=days_ago(2)
    )

    await run_maintenance(engine, "weekly", llm=chat.llm())

    assert (await payload(engine, newer))["superseded_by"] == trusted_old
    assert (await payload(engine, agent_new))["superseded_by"] == direct_old
    assert set(await active(engine)) == {trusted_old, direct_old}


async def test_a_newer_low_trust_memory_never_archives_a_higher_trust_one(
    engine: Engine, chat: FakeChat
) -> None:
    chat.handlers["conflicts"] = lambda user: verdict("contradiction")
    trusted = await add(engine, DARK, mem_type="preference", trust="high", created_at=days_ago(9))
    weak = await add(engine, LIGHT, mem_type="preference", trust="low", created_at=days_ago(1))
    report = await run_maintenance(engine, "weekly", llm=chat.llm())
    assert set(await active(engine)) == {trusted, weak}
    step = next(s for s in report.steps if s.name == "conflicts")
    assert step.counts["kept_higher_trust"] == 1
    assert step.ids["kept_higher_trust"] == [trusted]


async def test_decisions_need_a_clear_contradiction(engine: Engine, chat: FakeChat) -> None:
    chat.handlers["conflicts"] = lambda user: verdict("contradiction", "medium")
    a = await add(engine, "We decided to use Kafka for event streaming", mem_type="decision")
    b = await add(engine, "We decided to use RabbitMQ for event streaming", mem_type="decision")
    await run_maintenance(engine, "weekly", llm=chat.llm())
    assert set(await active(engine)) == {a, b}


async def test_a_duplicate_verdict_merges_like_dedup(engine: Engine, chat: FakeChat) -> None:
    chat.handlers["conflicts"] = lambda user: verdict("duplicate")
    high = await add(
        engine, "The user wants answers in German", mem_type="preference", trust="high"
    )
    low = await add(
        engine,
        "User would like all answers written in German please",
        mem_type="preference",
        trust="low",
    )
    await run_maintenance(engine, "weekly", llm=chat.llm())
    p = await payload(engine, low)
    assert (p["archived_reason"], p["superseded_by"]) == ("duplicate", high)


@pytest.mark.parametrize(
    "answer",
    [
        "They contradict; keep B.",
        json.dumps({"verdict": "keep_B", "confidence": "high"}),
        json.dumps({"verdict": "contradiction", "confidence": "certain"}),
        json.dumps({"verdict": "contradiction"}),
        json.dumps({"verdict": "contradiction", "confidence": "high", "winner": "B"}),
        verdict("contradiction", "low"),
        verdict("compatible"),
    ],
    ids=[
        "prose",
        "unknown-verdict",
        "unknown-confidence",
        "missing-key",
        "extra-key",
        "low-confidence",
        "compatible",
    ],
)
async def test_an_unusable_or_unsure_answer_changes_nothing(
    engine: Engine, chat: FakeChat, answer: str
) -> None:
    chat.handlers["conflicts"] = lambda user: answer
    await add(engine, DARK, mem_type="preference", created_at=days_ago(10))
    # Older than re-extraction's window, so only the conflict step could change anything.
    await add(engine, LIGHT, mem_type="preference", created_at=days_ago(3))
    before = await snapshot(engine)
    report = await run_maintenance(engine, "weekly", llm=chat.llm())
    assert_same_memories(await snapshot(engine), before)
    assert report.summary().conflicts == 0
    assert len(chat.prompts["conflicts"]) == 1

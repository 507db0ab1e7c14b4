"""Consolidation: old task-log clusters become one knowledge memory that read every member."""

from __future__ import annotations

import json
from collections.abc import Callable

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.maintenance.runner import run_maintenance
from engram_api.runtime import Engine, open_engine
from engram_api.settings import EngramSettings
from tests.engram_api.maintenance.helpers import (
    FakeChat,
    active,
    add,
    assert_same_memories,
    days_ago,
    payload,
    quoted,
    snapshot,
)


def logs(n: int) -> list[str]:
    return [
        f"Ran the nightly import job for batch {i}; it finished in {i + 3} minutes"
        for i in range(n)
    ]


def summary(text: str) -> Callable[[str], str]:
    return lambda user: json.dumps({"summary": text})


async def test_a_large_cluster_is_summarised_map_reduce_reading_every_member(
    settings_factory: Callable[..., EngramSettings], chat: FakeChat
) -> None:
    settings = settings_factory(
        maintenance={"consolidation": {"chunk_chars": 500, "max_cluster_size": 60}}
    )
    chat.handlers["consolidate_map"] = summary("Partial: nightly imports succeed.")
    chat.handlers["consolidate_final"] = summary("Nightly imports succeed in 3-30 minutes.")
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        texts = logs(25)
        ids = [
            await add(engine, t, mem_type="task_log", created_at=days_ago(40 + i))
            for i, t in enumerate(texts)
        ]
        young = await add(
            engine,
            "Ran the nightly import job for batch 99; it finished",
            mem_type="task_log",
            created_at=days_ago(1),
        )

        report = await run_maintenance(engine, "weekly", llm=chat.llm())

        seen = [q for prompt in chat.prompts["consolidate_map"] for q in quoted(prompt)]
        assert sorted(seen) == sorted(texts)  # every member read exactly once
        assert len(chat.prompts["consolidate_map"]) > 1
        assert chat.prompts["consolidate_final"]
        knowledge = await active(engine, mem_types=frozenset({"knowledge"}))
        [(kid, k)] = knowledge.items()
        assert k["content"] == "Nightly imports succeed in 3-30 minutes."
        assert sorted(k["consolidated_from"]) == sorted(ids)
        assert (k["scope"], k["source"], k["trust"]) == ("global", "inferred", "medium")
        for mid in ids:
            p = await payload(engine, mid)
            assert (p["archived"], p["archived_reason"], p["consolidated_into"]) == (
                1,
                "consolidated",
                kid,
            )
        assert (await payload(engine, young))["archived"] == 0
        assert report.summary().created == 1


async def test_a_failed_summary_archives_nothing_and_decay_spares_the_cluster(
    engine: Engine, chat: FakeChat
) -> None:
    chat.handlers["consolidate_final"] = lambda user: "I could not summarise these."
    ids = [await add(engine, t, mem_type="task_log", created_at=days_ago(200)) for t in logs(4)]
    before = await snapshot(engine)
    report = await run_maintenance(engine, "weekly", llm=chat.llm())
    assert_same_memories(await snapshot(engine), before)
    steps = {s.name: s for s in report.steps}
    assert "logs kept" in steps["consolidation"].errors[0]
    assert steps["decay"].counts.get("spared_for_consolidation") == len(ids)


async def test_without_an_llm_clusters_are_distilled_extractively_before_decay(
    engine: Engine,
) -> None:
    ids = [await add(engine, t, mem_type="task_log", created_at=days_ago(200)) for t in logs(3)]
    report = await run_maintenance(engine, "weekly", llm=None)
    steps = {s.name: s for s in report.steps}
    assert steps["consolidation"].status == "ok"
    assert steps["consolidation"].counts["consolidated_clusters"] == 1
    [(kid, k)] = (await active(engine, mem_types=frozenset({"knowledge"}))).items()
    assert k["consolidation_method"] == "extractive"
    assert sorted(k["consolidated_from"]) == sorted(ids)
    assert "From 3 task logs" in k["content"]
    assert "batch 0-2" in k["content"]
    assert "3 times" in k["content"]
    for mid in ids:
        p = await payload(engine, mid)
        assert (p["archived_reason"], p["consolidated_into"]) == ("consolidated", kid)
    assert not steps["decay"].ids.get("archived")  # nothing was lost to decay


async def test_decay_spares_clustered_logs_when_consolidation_is_disabled(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory(maintenance={"consolidation": {"enabled": False}})
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        ids = [await add(engine, t, mem_type="task_log", created_at=days_ago(200)) for t in logs(3)]
        lone = await add(
            engine, "Rotated the on-call pager", mem_type="task_log", created_at=days_ago(200)
        )
        report = await run_maintenance(engine, "weekly", llm=None)
        decay = {s.name: s for s in report.steps}["decay"]
        assert decay.counts["spared_for_consolidation"] == len(ids)
        assert decay.ids["archived"] == [lone]


async def test_a_spent_token_budget_stops_llm_steps_and_says_so(
    engine: Engine, chat: FakeChat
) -> None:
    chat.handlers["reextract"] = lambda user: json.dumps(
        {"statements": [{"content": "The user is vegetarian.", "mem_type": "fact"}]}
    )
    await add(engine, "The user is vegetarian and likes tea")
    for t in logs(3):
        await add(engine, t, mem_type="task_log", created_at=days_ago(40))
    report = await run_maintenance(engine, "weekly", llm=chat.llm(budget=100))
    steps = {s.name: s for s in report.steps}
    assert steps["reextract"].status == "stopped"
    assert "token budget" in steps["reextract"].reason
    assert steps["consolidation"].status == "skipped"
    assert "token budget" in steps["consolidation"].reason
    assert not chat.api.script.requests
    assert report.llm["budget"] == 100
    assert "stopped" in report.llm

"""--dry-run computes everything and changes nothing."""

from __future__ import annotations

from engram_api.maintenance.report import latest_reports
from engram_api.maintenance.runner import run_maintenance
from engram_api.runtime import Engine
from tests.engram_api.maintenance.helpers import (
    FakeChat,
    add,
    assert_same_memories,
    days_ago,
    snapshot,
)


async def test_a_dry_run_changes_nothing_and_reports_what_a_real_run_then_does(
    engine: Engine, chat: FakeChat
) -> None:
    await add(engine, "The user prefers dark mode", mem_type="preference", trust="high")
    await add(engine, "the user prefers dark mode.", mem_type="preference")
    for i in range(3):
        await add(
            engine,
            f"Ran the nightly import job for batch {i}; it finished fine",
            mem_type="task_log",
            created_at=days_ago(30 + i),
        )
    await add(engine, "Tag and push to release", mem_type="procedure", created_at=days_ago(500))
    before = await snapshot(engine)

    dry = await run_maintenance(engine, "weekly", dry_run=True, llm=chat.llm())

    assert_same_memories(await snapshot(engine), before)
    assert dry.dry_run
    assert dry.summary().dry_run
    # No LLM call is made in a dry run: it costs tokens and could not be undone anyway.
    assert not chat.api.script.requests
    steps = {s.name: s for s in dry.steps}
    assert steps["dedup"].counts["merged"] == 1
    assert steps["consolidation"].counts["clusters"] == 1
    assert steps["decay"].counts["archived"] == 1

    real = await run_maintenance(engine, "weekly", llm=None)
    real_steps = {s.name: s for s in real.steps}
    assert real_steps["dedup"].ids["archived"] == steps["dedup"].ids["archived"]
    # Dedup's loser is not decayed twice; the decay count is the same.
    assert real_steps["decay"].ids["archived"] == steps["decay"].ids["archived"]
    assert await snapshot(engine) != before
    assert [r["id"] for r in latest_reports(engine.settings.data_dir, 2)] == [real.id, dry.id]

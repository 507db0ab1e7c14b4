"""Decay: the DESIGN formula, half-lives from settings, archiving with reason decay."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.maintenance.decay import importance
from engram_api.maintenance.runner import run_maintenance
from engram_api.runtime import Engine, open_engine
from engram_api.settings import EngramSettings
from tests.engram_api.maintenance.helpers import active, add, days_ago, payload


def test_importance_halves_per_half_life_and_slows_with_use_up_to_the_cap() -> None:
    assert importance(30, 0, 30, 3.0) == pytest.approx(0.5)
    assert importance(60, 0, 30, 3.0) == pytest.approx(0.25)
    # One access: effective age / (1 + ln 2).
    assert importance(30, 1, 30, 3.0) == pytest.approx(math.exp(-math.log(2) / (1 + math.log(2))))
    # ln(1 + n) is capped at 3: 1000 accesses count as many as 20.
    assert importance(300, 1000, 30, 3.0) == pytest.approx(importance(300, 20, 30, 3.0), 0.02)
    assert importance(300, 1000, 30, 3.0) == pytest.approx(0.5 ** (300 / 4 / 30))


async def test_old_unused_task_logs_and_procedures_are_archived_with_reason_decay(
    engine: Engine,
) -> None:
    stale_log = await add(
        engine, "Rotated the staging certificates", mem_type="task_log", created_at=days_ago(120)
    )
    used_log = await add(
        engine, "Reindexed the search cluster", mem_type="task_log", created_at=days_ago(120)
    )
    fresh_log = await add(
        engine, "Cleaned the build cache", mem_type="task_log", created_at=days_ago(20)
    )
    stale_proc = await add(
        engine, "To release, tag and push", mem_type="procedure", created_at=days_ago(400)
    )
    young_proc = await add(
        engine,
        "To roll back, redeploy the previous tag",
        mem_type="procedure",
        created_at=days_ago(200),
    )
    old_fact = await add(engine, "The billing service is owned by Alice", created_at=days_ago(3000))
    await engine.store.set_payload([used_log], {"access_count": 20})

    report = await run_maintenance(engine, "weekly", llm=None)

    for gone in (stale_log, stale_proc):
        p = await payload(engine, gone)
        assert (p["archived"], p["archived_reason"]) == (1, "decay")
    assert set(await active(engine)) == {used_log, fresh_log, young_proc, old_fact}
    decay = next(s for s in report.steps if s.name == "decay")
    assert sorted(decay.ids["archived"]) == sorted([stale_log, stale_proc])


async def test_half_lives_come_from_settings(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory(
        maintenance={"decay": {"half_life_days": {"fact": 10, "task_log": 1000}}}
    )
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        fact = await add(engine, "The office wifi is called Guest", created_at=days_ago(40))
        log = await add(
            engine,
            "Rotated the staging certificates",
            mem_type="task_log",
            created_at=days_ago(400),
        )
        await run_maintenance(engine, "weekly", llm=None)
        assert (await payload(engine, fact))["archived_reason"] == "decay"
        assert (await payload(engine, log))["archived"] == 0

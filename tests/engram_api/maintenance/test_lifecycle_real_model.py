"""The memory lifecycle on the real default model: the labelled corpus and the cases a new user
meets (Postgres 15/16, pnpm/npm, a dark-mode paraphrase, restore then rerun, task-log clusters
without an LLM, long memories sharing an opening, concurrent identical adds)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engram_api.cli import main
from engram_api.embeddings.base import Embedder
from engram_api.maintenance import corpus
from engram_api.maintenance.runner import run_maintenance
from engram_api.maintenance.sameness import judge
from engram_api.runtime import open_engine
from engram_api.store.base import Match
from tests.engram_api.maintenance.conftest import make_settings
from tests.engram_api.maintenance.helpers import active, add, days_ago, payload

CORPUS = Path(__file__).resolve().parents[2] / "corpora" / "lifecycle.yaml"


def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    """One `engram --json ...` call on the embedded default (the real model), parsed."""
    capsys.readouterr()
    assert main(["--data-dir", str(tmp_path / "data"), "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


async def cosine(model: Embedder, a: str, b: str) -> float:
    va, vb = await model.embed_documents([a, b])
    return float(va @ vb)


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("The staging DB is Postgres 15.", "The staging DB is Postgres 16.", "conflict"),
        ("Use pnpm, not npm.", "Use npm, not pnpm.", "conflict"),
        (
            "Always squash commits before merging.",
            "Never squash commits before merging.",
            "conflict",
        ),
        (
            "The user prefers dark mode in the code editor",
            "The user prefers the dark mode in the code editor.",
            "duplicate",
        ),
        (
            "Alice owns the billing service.",
            "The billing service is owned by Alice.",
            "duplicate",
        ),
        ("端口是 8080。", "端口是 9090。", "conflict"),
        ("部署前必须运行测试。", "部署前不运行测试。", "conflict"),
        ("用户喜欢深色模式。", "用户喜欢浅色模式。", "conflict"),
        ("用户喜欢深色模式。", "用户喜欢深色模式", "duplicate"),
    ],
)
async def test_the_same_memory_needs_closeness_and_agreement(
    real_embedder: Embedder, a: str, b: str, kind: str
) -> None:
    profile = make_settings(Path("/nonexistent")).maintenance.profile_for(real_embedder.model_id)
    assert judge(await cosine(real_embedder, a, b), a, b, profile).kind == kind


async def test_a_fixed_slice_of_the_corpus_meets_the_goals(
    tmp_path: Path, real_embedder: Embedder
) -> None:
    pairs = [p for i, p in enumerate(corpus.load(CORPUS)) if i % 5 == 0 or p.id.startswith("long")]
    assert {p.lang for p in pairs} == {"en", "zh"}
    async with open_engine(
        make_settings(tmp_path), background=False, embedder=real_embedder
    ) as engine:
        ids = await corpus.store_pairs(engine, pairs)
        await run_maintenance(engine, "weekly", llm=None)
        figures = (await corpus.outcomes(engine, pairs, ids)).figures()
    assert figures["distinct_archived"] == 0
    assert figures["contradictions_merged"] == 0
    assert figures["contradictions_wrong_direction"] == 0
    assert figures["duplicate_recall"] >= 0.85
    assert figures["contradictions_resolved_right_share"] >= 0.80


def test_postgres_15_then_16_keeps_the_newer_and_never_merges_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = cli(tmp_path, capsys, "add", "The staging DB is Postgres 15", "--scope", "global")
    new = cli(tmp_path, capsys, "add", "The staging DB is Postgres 16", "--scope", "global")
    daily = cli(tmp_path, capsys, "maintenance", "daily")
    assert daily["totals"]["merged"] == 0
    weekly = cli(tmp_path, capsys, "maintenance", "weekly")
    [action] = next(s for s in weekly["steps"] if s["name"] == "conflicts")["actions"]
    assert action["action"] == "superseded"
    assert (action["id"], action["survivor"]) == (old["id"], new["id"])
    assert action["text"] == "The staging DB is Postgres 15"
    assert action["survivor_text"] == "The staging DB is Postgres 16"
    got = cli(tmp_path, capsys, "get", old["id"])
    assert (got["archived"], got["archived_reason"], got["superseded_by"]) == (
        True,
        "superseded",
        new["id"],
    )
    found = cli(tmp_path, capsys, "search", "which Postgres version is staging on?")
    assert [r["content"] for r in found["results"]] == ["The staging DB is Postgres 16"]


def test_pnpm_not_npm_then_the_reverse_keeps_the_newer_preference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = cli(
        tmp_path, capsys, "add", "Use pnpm, not npm", "--scope", "global", "--type", "preference"
    )
    second = cli(
        tmp_path, capsys, "add", "Use npm, not pnpm", "--scope", "global", "--type", "preference"
    )
    cli(tmp_path, capsys, "maintenance", "weekly")
    assert cli(tmp_path, capsys, "get", first["id"])["superseded_by"] == second["id"]
    assert cli(tmp_path, capsys, "get", second["id"])["archived"] is False


def test_a_paraphrase_merges_and_a_restore_lasts_until_an_explicit_forget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = cli(
        tmp_path,
        capsys,
        "add",
        "The user prefers dark mode in the code editor",
        "--scope",
        "global",
        "--type",
        "preference",
    )
    b = cli(
        tmp_path,
        capsys,
        "add",
        "The user prefers the dark mode in the code editor.",
        "--scope",
        "global",
        "--type",
        "preference",
    )
    first = cli(tmp_path, capsys, "maintenance", "daily")
    assert first["totals"]["merged"] == 1
    [merged] = next(s for s in first["steps"] if s["name"] == "dedup")["actions"]
    loser = merged["id"]
    assert {loser, merged["survivor"]} == {a["id"], b["id"]}

    restored = cli(tmp_path, capsys, "restore-memory", loser)
    assert restored["undid"]["step"] == "dedup"
    again = cli(tmp_path, capsys, "maintenance", "daily")
    dedup = next(s for s in again["steps"] if s["name"] == "dedup")
    assert again["totals"]["merged"] == 0
    assert dedup["counts"]["skipped_restored"] == 1
    assert "not merged again" in dedup["actions"][0]["reason"]
    assert cli(tmp_path, capsys, "get", loser)["archived"] is False

    cli(tmp_path, capsys, "forget", loser, "--reason", "the user said so after all")
    assert cli(tmp_path, capsys, "get", loser)["archived"] is True


async def test_task_log_clusters_are_distilled_offline_not_decayed(
    tmp_path: Path, real_embedder: Embedder
) -> None:
    texts = [
        "Ran the nightly invoice export; it finished in 4 minutes with 1200 rows.",
        "Ran the nightly invoice export; it finished in 6 minutes with 1350 rows.",
        "Ran the nightly invoice export; it failed: the SFTP server timed out.",
        "Ran the nightly invoice export; it finished in 5 minutes with 1280 rows.",
    ]
    async with open_engine(
        make_settings(tmp_path), background=False, embedder=real_embedder
    ) as engine:
        ids = [
            await add(engine, t, mem_type="task_log", created_at=days_ago(200 + i))
            for i, t in enumerate(texts)
        ]
        report = await run_maintenance(engine, "weekly", llm=None)
        [(kid, k)] = (await active(engine, mem_types=frozenset({"knowledge"}))).items()
        for mid in ids:
            assert (await payload(engine, mid))["consolidated_into"] == kid
    assert k["consolidation_method"] == "extractive"
    assert "SFTP server timed out" in k["content"]
    assert "1 failed" in k["content"]
    decay = next(s for s in report.steps if s.name == "decay")
    assert not decay.ids.get("archived")


async def test_long_memories_sharing_an_opening_are_neither_merged_nor_tied(
    tmp_path: Path, real_embedder: Embedder
) -> None:
    long = [p for p in corpus.load(CORPUS) if p.kind == "long_shared_opening"]
    texts = sorted({s.content for p in long for s in (p.a, p.b)})
    assert len(texts) == 5
    assert min(len(t) for t in texts) > 3_500
    async with open_engine(
        make_settings(tmp_path), background=False, embedder=real_embedder
    ) as engine:
        for t in texts:
            await add(engine, t, mem_type="knowledge")
        report = await run_maintenance(engine, "daily", llm=None)
        found = await engine.service.search(
            agent="main", query="certificate renewal with the cert rotation job", limit=5
        )
        query = await real_embedder.embed_query("certificate renewal with the cert rotation job")
        vectors = await real_embedder.embed_documents(texts)
    assert report.summary().merged == 0
    assert "Certificate renewal" in found["results"][0]["content"]
    # The tails are embedded too: the dense scores differ, the right memory first.
    dense = [round(float(query @ v), 4) for v in vectors]
    assert len(set(dense)) == len(dense)
    assert "Certificate renewal" in texts[dense.index(max(dense))]


@pytest.mark.parametrize("mode", ["embedded", "local-client"])
async def test_five_concurrent_identical_adds_store_one_memory(
    tmp_path: Path, real_embedder: Embedder, mode: str
) -> None:
    async with open_engine(
        make_settings(tmp_path, mode), background=False, embedder=real_embedder
    ) as engine:
        outs = await asyncio.gather(
            *(
                engine.service.add(
                    agent="main",
                    content="The user prefers dark mode",
                    scope="global",
                    mem_type="preference",
                )
                for _ in range(5)
            )
        )
        assert len({o["id"] for o in outs}) == 1
        assert await engine.store.count(Match(archived=False)) == 1

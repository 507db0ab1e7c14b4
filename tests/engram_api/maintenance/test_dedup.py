"""Dedup on both stores: who survives, what is merged, what is never touched."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engram_api.embeddings.base import Vector
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.maintenance.merge import star_clusters
from engram_api.maintenance.neighbours import PairScan
from engram_api.maintenance.runner import run_maintenance
from engram_api.runtime import Engine, open_engine
from engram_api.settings import EngramSettings
from tests.engram_api.maintenance.helpers import active, add, days_ago, payload

DARK = "The user prefers dark mode in every editor"
DARK_2 = "the user prefers dark mode in every editor."
DARK_3 = "The user prefers dark mode in every editor!"


async def test_duplicates_merge_into_the_highest_trust_memory_with_summed_access_counts(
    engine: Engine,
) -> None:
    low_old = await add(engine, DARK, mem_type="preference", trust="low", context="chat 1")
    high = await add(engine, DARK_2, mem_type="preference", trust="high", context="chat 2")
    med_used = await add(engine, DARK_3, mem_type="preference", trust="medium", context="chat 3")
    await engine.store.set_payload([low_old], {"access_count": 5})
    await engine.store.set_payload([med_used], {"access_count": 7})

    report = await run_maintenance(engine, "daily", llm=None)

    survivor = await payload(engine, high)
    assert survivor["archived"] == 0
    assert survivor["access_count"] == 12
    assert set(survivor["context"].splitlines()) == {"chat 1", "chat 2", "chat 3"}
    assert sorted(survivor["merged_from"]) == sorted([low_old, med_used])
    for loser in (low_old, med_used):
        p = await payload(engine, loser)
        assert (p["archived"], p["archived_reason"], p["superseded_by"]) == (1, "duplicate", high)
        # The loser keeps its own text and context: archived, never rewritten.
        assert p["content"] in (DARK, DARK_3)
    dedup = next(s for s in report.steps if s.name == "dedup")
    assert dedup.counts["merged"] == 2
    assert sorted(dedup.ids["archived"]) == sorted([low_old, med_used])


async def test_equal_trust_falls_back_to_most_accessed_then_newest(engine: Engine) -> None:
    older = await add(engine, DARK, mem_type="preference", created_at=days_ago(3))
    newer = await add(engine, DARK_2, mem_type="preference", created_at=days_ago(1))
    used = await add(engine, "Deploys happen on Tuesdays", created_at=days_ago(5))
    unused_new = await add(engine, "deploys happen on Tuesdays.", created_at=days_ago(1))
    await engine.store.set_payload([used], {"access_count": 3})

    await run_maintenance(engine, "daily", llm=None)

    assert (await payload(engine, older))["superseded_by"] == newer
    assert (await payload(engine, unused_new))["superseded_by"] == used
    assert set(await active(engine)) == {newer, used}


async def test_other_scopes_and_types_are_never_merged(engine: Engine) -> None:
    ids = [
        await add(engine, DARK, scope="global", mem_type="preference"),
        await add(engine, DARK, scope="group:team", mem_type="preference"),
        await add(engine, DARK, scope="global", mem_type="fact"),
    ]
    report = await run_maintenance(engine, "daily", llm=None)
    assert set(await active(engine)) == set(ids)
    assert report.total("merged") == 0


async def test_task_logs_are_never_merged_with_each_other(engine: Engine) -> None:
    ids = [
        await add(engine, "Ran the nightly import; it finished fine", mem_type="task_log"),
        await add(engine, "ran the nightly import; it finished fine.", mem_type="task_log"),
    ]
    await run_maintenance(engine, "daily", llm=None)
    assert set(await active(engine)) == set(ids)


async def test_archived_memories_are_never_candidates(engine: Engine) -> None:
    keep = await add(engine, DARK, mem_type="preference", trust="low")
    gone = await add(engine, DARK_2, mem_type="preference", trust="high")
    await engine.service.forget(agent="main", memory_id=gone, reason="user asked")

    report = await run_maintenance(engine, "daily", llm=None)

    assert (await payload(engine, keep))["archived"] == 0
    archived = await payload(engine, gone)
    assert (archived["archived_reason"], archived["superseded_by"]) == ("user asked", "")
    assert report.total("merged") == 0


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(384)
        self.texts = 0

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.texts += len(texts)
        return await super().embed_documents(texts)

    async def embed_query(self, text: str) -> Vector:
        self.texts += 1
        return await super().embed_query(text)


async def test_dedup_reads_stored_vectors_and_embeds_nothing(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    embedder = CountingEmbedder()
    async with open_engine(settings_factory(), background=False, embedder=embedder) as engine:
        for text in (DARK, DARK_2, "Deploys happen on Tuesdays", "deploys happen on Tuesdays."):
            await add(engine, text, mem_type="preference")
        before = embedder.texts
        report = await run_maintenance(engine, "weekly", llm=None)
        assert report.total("merged") == 2
        assert embedder.texts == before


async def test_a_page_of_one_still_merges_with_the_payloads_of_earlier_pages(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    # Neighbour hits carry no payload: pair members come from the pages, one point each here.
    settings = settings_factory(maintenance={"page_size": 1})
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        ids = [await add(engine, t, mem_type="preference", context=t) for t in (DARK, DARK_2)]
        high = await add(engine, DARK_3, mem_type="preference", trust="high")
        for i, pid in enumerate(ids):
            await engine.store.set_payload([pid], {"access_count": i + 2})
        report = await run_maintenance(engine, "daily", llm=None)
        survivor = await payload(engine, high)
        assert sorted(survivor["merged_from"]) == sorted(ids)
        assert survivor["access_count"] == 5
        assert set(survivor["context"].splitlines()) == {DARK, DARK_2}
        assert report.total("merged") == 2


def test_clusters_are_stars_so_a_chain_never_merges_its_dissimilar_ends() -> None:
    # a~b and b~c are similar, a and c are not: only one of the pairs merges per run.
    p = {
        "a": {"trust": "high", "access_count": 0, "created_at_epoch": 1.0},
        "b": {"trust": "medium", "access_count": 0, "created_at_epoch": 1.0},
        "c": {"trust": "low", "access_count": 0, "created_at_epoch": 1.0},
    }
    scan = PairScan(pairs={("a", "b"): 0.95, ("b", "c"): 0.95}, payloads=p)
    assert star_clusters(scan) == [("a", ["b"])]
    # With b as the best memory it is the centre and takes both.
    p["b"]["trust"], p["a"]["trust"] = "high", "medium"
    assert star_clusters(scan) == [("b", ["a", "c"])]

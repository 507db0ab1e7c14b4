"""The composition root: which processes build search indexes in the background."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.memory.service import MemoryService
from engram_api.runtime import open_engine
from engram_api.settings import EngramSettings, StoreSettings
from engram_api.store.edge import EdgeStore
from tests.engram_api.server.harness import wait_until


def settings(tmp_path: Path, *, index_threshold: int) -> EngramSettings:
    return EngramSettings(
        data_dir=tmp_path / "data",
        # The hash embedder would otherwise choose exact search, which never builds a graph.
        store=StoreSettings(exact_search=False, index_threshold=index_threshold),
        embeddings=EmbeddingSettings(primary=ProviderSettings(provider="hash")),
    )


async def add_many(service: MemoryService, n: int) -> None:
    for i in range(n):
        await service.add(
            agent="main", content=f"fact number {i} about the billing service", scope="global"
        )


@pytest.mark.parametrize(
    ("background", "threshold", "builds"), [(True, 20, True), (False, 20, False), (True, 0, False)]
)
async def test_only_a_long_running_engine_builds_the_graph_and_only_when_enabled(
    tmp_path: Path, background: bool, threshold: int, builds: bool
) -> None:
    async with open_engine(
        settings(tmp_path, index_threshold=threshold),
        background=background,
        embedder=HashingEmbedder(384),
    ) as engine:
        store = engine.store
        assert isinstance(store, EdgeStore)
        await add_many(engine.service, 25)
        if builds:
            await wait_until(lambda: store.index_status().indexed_points >= 20, within=60)
        else:
            # An automatic build starts on the write that crosses the threshold and takes
            # seconds, so it would still be running here.
            status = store.index_status()
            assert (status.building, status.indexed_points, status.unindexed_points) == (
                False,
                0,
                25,
            )


def local_settings(tmp_path: Path, model: str = "") -> EngramSettings:
    return EngramSettings(
        data_dir=tmp_path / "data",
        embeddings=EmbeddingSettings(primary=ProviderSettings(provider="local", model=model)),
    )


async def test_a_new_data_dir_gets_the_minilm_default(tmp_path: Path) -> None:
    async with open_engine(local_settings(tmp_path), background=False) as engine:
        assert engine.embedder.model_id == "local/all-MiniLM-L6-v2-int8"
        assert str(getattr(engine.store, "fusion", "")) == "rrf:5"  # chosen for this model


async def test_a_data_dir_made_with_the_multilingual_model_keeps_being_served_by_it(
    tmp_path: Path,
) -> None:
    e5 = "local/multilingual-e5-small-q4"
    async with open_engine(local_settings(tmp_path, e5), background=False) as engine:
        assert str(getattr(engine.store, "fusion", "")) == "dbsf"  # chosen for this model
        stored = await engine.service.add(agent="main", content="Tea, no sugar", scope="global")
    # Reopened with the settings left to default: the recorded model serves, data intact.
    async with open_engine(local_settings(tmp_path), background=False) as engine:
        assert engine.embedder.model_id == e5
        assert str(getattr(engine.store, "fusion", "")) == "dbsf"
        found = await engine.service.search(agent="main", query="tea with no sugar")
        assert [r["id"] for r in found["results"]] == [stored["id"]]

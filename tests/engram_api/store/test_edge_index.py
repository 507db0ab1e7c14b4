"""The embedded store's HNSW builds: built off the request path, swapped in, nothing lost."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe

from engram_api.store.base import DENSE, SPARSE, Match, PointWrite, StoredPoint
from engram_api.store.edge import EdgeStore, IndexStatus
from tests.engram_api.server.harness import wait_until

DIM = 384
EVERYTHING = Match(archived=None)
LIVE_AB = Match(scopes=frozenset({"group:a", "group:b"}), archived=False)


def clustered(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Points in tight clusters of ~40 and queries near cluster centres: a clear top 10,
    even filtered to the 45% of points that are live in group:a or group:b."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, n // 40), DIM)).astype(np.float32)
    points = centres[rng.integers(0, len(centres), n)] + rng.normal(0, 0.05, (n, DIM))
    queries = centres[rng.integers(0, len(centres), 40)] + rng.normal(0, 0.05, (40, DIM))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return points.astype(np.float32), queries.astype(np.float32)


def sentence_like(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectors shaped like a sentence model's, with questions that match nothing closely.

    A shared mean direction (so many dimensions have one sign for nearly every point), meaning
    spread over a few dozen directions, and queries off to one side (best cosine ~0.26, as
    LoCoMo's questions get against 100k memories in a narrow ops vocabulary: ~0.22). This is
    where 1-bit codes steered the graph walk wrong: 0.69 of the exact top 10 here, int8 1.0.
    """
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=DIM)
    mean *= 0.6 / np.linalg.norm(mean)
    basis = np.linalg.qr(rng.normal(size=(DIM, 32)))[0]
    spread = 0.5 * 0.93 ** np.arange(32)
    aside = rng.normal(size=DIM)
    aside /= np.linalg.norm(aside)

    def draw(k: int, offset: np.ndarray | float) -> np.ndarray:
        x = mean + (rng.normal(size=(k, 32)) * spread) @ basis.T + rng.normal(0, 0.01, (k, DIM))
        x = x + offset
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    return draw(n, 0.0), draw(40, aside + rng.normal(0, 0.25, (40, DIM)))


def writes(vectors: np.ndarray, *, start: int = 0) -> list[PointWrite]:
    scopes = ["group:a", "group:b", "group:c", "global"]
    return [
        PointWrite(
            str(uuid.UUID(int=start + i + 1)),
            v,
            None,
            {"scope": scopes[i % 4], "archived": int(i % 10 == 0), "n": start + i},
        )
        for i, v in enumerate(vectors)
    ]


async def filled(path: Path, vectors: np.ndarray, **kwargs: Any) -> EdgeStore:
    store = EdgeStore(path, **kwargs)
    await store.open(DIM)
    pts = writes(vectors)
    for i in range(0, len(pts), 500):
        await store.upsert(pts[i : i + 500])
    return store


async def ids_of(store: EdgeStore, queries: np.ndarray, match: Match) -> list[set[str]]:
    return [
        {h.id for h in await store.query(dense=q, sparse=None, match=match, limit=10, mode="dense")}
        for q in queries
    ]


async def everything(store: EdgeStore) -> dict[str, StoredPoint]:
    points, _ = await store.scroll(EVERYTHING, limit=100_000)
    return {p.id: p for p in points}


async def after_restart(path: Path) -> tuple[int, int]:
    """(points, indexed points) as the next process to open the store at `path` finds them."""
    store = EdgeStore(path)
    await store.open(DIM)
    try:
        return len(await everything(store)), store.index_status().indexed_points
    finally:
        await store.close()


def leftovers(path: Path) -> list[str]:
    return sorted(
        p.name for p in path.parent.iterdir() if p.name.endswith((".build", ".old", ".trash"))
    )


def recall(found: list[set[str]], truth: list[set[str]]) -> float:
    return float(np.mean([len(a & b) / len(b) for a, b in zip(found, truth, strict=True)]))


@pytest.mark.parametrize("geometry", [clustered, sentence_like])
async def test_a_built_graph_is_swapped_in_and_finds_what_the_exact_scan_finds(
    tmp_path: Path, geometry: Callable[[int, int], tuple[np.ndarray, np.ndarray]]
) -> None:
    # 8,000 vectors: above the full-scan threshold, so unfiltered searches walk the graph.
    vectors, queries = geometry(8000, 1)
    exact = await filled(tmp_path / "exact", vectors, exact=True)
    store = await filled(tmp_path / "edge", vectors)
    try:
        truth = await ids_of(exact, queries, EVERYTHING)
        assert store.index_status().unindexed_points == 8000
        assert store.shard.info().indexed_vectors_count == 0  # no sparse vectors here either

        assert await store.build_index() is True

        assert store.shard.info().indexed_vectors_count == 8000

        status = store.index_status()
        assert (status.indexed_points, status.unindexed_points, status.building) == (8000, 0, False)
        for match in (EVERYTHING, LIVE_AB):
            truth = await ids_of(exact, queries, match)
            found = await ids_of(store, queries, match)
            assert recall(found, truth) >= 0.95, (match, recall(found, truth))
        assert leftovers(tmp_path / "edge") == []
        assert (tmp_path / "edge.index.json").exists()
    finally:
        await store.close()
        await exact.close()


async def test_writes_made_during_a_build_are_replayed_onto_the_new_graph(tmp_path: Path) -> None:
    vectors, _ = clustered(3000, seed=2)
    path = tmp_path / "edge"
    store = await filled(path, vectors)
    try:
        before = await everything(store)
        build = asyncio.create_task(store.build_index())
        # The copy is taken on the store's worker; a write queued after it starts is journaled.
        await wait_until(lambda: (tmp_path / "edge.build").exists(), within=30)
        extra, _ = clustered(200, seed=3)
        await store.upsert(writes(extra, start=10_000))
        old_ids = sorted(before)[:50]
        await store.set_payload(old_ids[:25], {"access_count": 7})
        await store.delete(old_ids[25:])
        assert store.index_status().building

        assert await build is True

        after = await everything(store)
        assert len(after) == 3000 + 200 - 25
        assert all(after[i].payload["access_count"] == 7 for i in old_ids[:25])
        assert not set(old_ids[25:]) & set(after)
        assert {p.id for p in writes(extra, start=10_000)} <= set(after)
        assert store.index_status().indexed_points == 3000
        assert store.index_status().unindexed_points == 200 + 25
    finally:
        await store.close()
    # And all of it survives a restart on the swapped-in shard.
    assert await after_restart(path) == (3000 + 200 - 25, 3000)


async def test_a_build_overrun_by_writes_is_abandoned_and_nothing_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    vectors, _ = clustered(2000, seed=4)
    store = await filled(tmp_path / "edge", vectors, journal_max_points=100)
    try:
        build = asyncio.create_task(store.build_index())
        await wait_until(lambda: (tmp_path / "edge.build").exists(), within=30)
        extra, _ = clustered(300, seed=5)
        for i in range(0, 300, 50):
            await store.upsert(writes(extra[i : i + 50], start=10_000 + i))

        assert await build is False

        assert len(await everything(store)) == 2300
        status = store.index_status()
        assert (status.indexed_points, status.unindexed_points, status.building) == (0, 2300, False)
        assert leftovers(tmp_path / "edge") == []
        assert "index build abandoned" in caplog.text
        assert "more than 100 are not kept" in caplog.text
    finally:
        await store.close()


async def test_closing_the_store_stops_a_running_build_and_keeps_every_point(
    tmp_path: Path,
) -> None:
    vectors, _ = clustered(3000, seed=6)
    path = tmp_path / "edge"
    store = await filled(path, vectors)
    build = asyncio.create_task(store.build_index())
    await wait_until(lambda: (tmp_path / "edge.build").exists(), within=30)
    await store.close()
    assert await build is False
    assert leftovers(path) == []

    assert await after_restart(path) == (3000, 0)


async def test_a_store_builds_on_its_own_once_enough_points_are_unindexed(
    tmp_path: Path,
) -> None:
    vectors, _ = clustered(1200, seed=7)
    store = await filled(tmp_path / "edge", vectors[:400], index_after=1000)
    try:
        assert store.index_status() == IndexStatus(0, 400, False)
        await store.upsert(writes(vectors[400:], start=400))
        await wait_until(lambda: store.index_status().indexed_points == 1200, within=60)
        assert not store.index_status().building
    finally:
        await store.close()


async def test_rewriting_the_same_points_counts_them_once_toward_a_build(tmp_path: Path) -> None:
    """Access counts rewrite the same hot memories on every search; that is not new work."""
    vectors, _ = clustered(300, seed=10)
    store = await filled(tmp_path / "edge", vectors, index_after=400)
    try:
        assert await store.build_index() is True
        hot = [p.id for p in writes(vectors[:10])]
        for n in range(100):
            await store.set_payload(hot, {"access_count": n})
        status = store.index_status()
        assert (status.unindexed_points, status.building) == (10, False)
        assert leftovers(tmp_path / "edge") == []
    finally:
        await store.close()


async def test_an_exact_store_never_builds_a_graph(tmp_path: Path) -> None:
    vectors, _ = clustered(500, seed=8)
    store = await filled(tmp_path / "edge", vectors, exact=True, index_after=100)
    try:
        assert await store.build_index() is False
        assert not store.index_status().building
        assert leftovers(tmp_path / "edge") == []
    finally:
        await store.close()


@pytest.mark.parametrize("half_done", [False, True])
async def test_an_interrupted_swap_is_undone_at_open(tmp_path: Path, half_done: bool) -> None:
    """A crash mid-swap leaves `.old` (every write) and maybe a new shard missing the journal."""
    vectors, _ = clustered(600, seed=9)
    path = tmp_path / "edge"
    store = await filled(path, vectors[:500])
    await store.close()
    behind = tmp_path / "behind"
    shutil.copytree(path, behind)  # the built copy: the state before the last writes
    store = EdgeStore(path)
    await store.open(DIM)
    await store.upsert(writes(vectors[500:], start=500))
    await store.close()
    path.rename(tmp_path / "edge.old")
    if half_done:
        behind.rename(path)
    (tmp_path / "edge.trash").mkdir()
    (tmp_path / "edge.build").mkdir()

    points, _ = await after_restart(path)
    assert points == 600
    assert leftovers(path) == []


async def test_a_graph_an_older_release_built_with_1_bit_codes_is_searched_exactly_then_rebuilt(
    tmp_path: Path,
) -> None:
    """Releases before int8 codes wrote 1-bit ones; the search parameters no longer suit them."""
    vectors, queries = sentence_like(8000, seed=11)
    exact = await filled(tmp_path / "exact", vectors, exact=True)
    truth = await ids_of(exact, queries, EVERYTHING)
    await exact.close()
    # What such a release left: its shard config, a built graph, a state file without codes.
    path = tmp_path / "edge"
    one_bit = qe.BinaryQuantizationConfig(
        query_encoding=qe.BinaryQuantizationQueryEncoding.Scalar8Bits
    )
    vec = qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine, quantization_config=one_bit)
    old = qe.EdgeShard.create(
        str(path),
        qe.EdgeConfig(
            vectors={DENSE: vec},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
        ),
    )
    pts = writes(vectors)
    old.update(
        qe.UpdateOperation.upsert_points(
            [qe.Point(p.id, {DENSE: np.asarray(p.dense).tolist()}, p.payload) for p in pts]
        )
    )
    old.optimize()
    old.close()
    (tmp_path / "edge.index.json").write_text('{"indexed_points": 8000}')

    store = EdgeStore(path)
    await store.open(DIM)
    try:
        # The old graph counts as no graph, and is walked with the full vectors meanwhile.
        assert store.index_status() == IndexStatus(0, 8000, False)
        assert recall(await ids_of(store, queries, EVERYTHING), truth) >= 0.95

        assert await store.build_index() is True

        assert store.index_status() == IndexStatus(8000, 0, False)
        assert recall(await ids_of(store, queries, EVERYTHING), truth) >= 0.95
        assert '"quantization": "int8"' in (tmp_path / "edge.index.json").read_text()
    finally:
        await store.close()


def test_the_build_process_fails_with_a_message_on_a_missing_shard(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "engram_api.store.edge_index", str(tmp_path / "none"), "384"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("index build failed: ")

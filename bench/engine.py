"""Engine benchmark: bulk insert, single add and filtered search, embedding time excluded.

Runs the embedded store (qdrant-edge) as configured by default twice: as filled, when every
point is scanned, and after the HNSW graph build (int8 codes, exact rescoring) that
`engram serve` starts in the background, with searches running during the build to show what
it costs them. Then the same store with `exact=True` (every candidate scored at full
precision) and, as the baseline in the same run, qdrant-client's local mode through the same
store interface. Vectors are precomputed with the hash embedder: latency does not depend on
their values; recall is measured by bench/retrieval.py and bench/graph_recall.py instead.

    .venv/bin/python bench/engine.py                 # 1k, 10k, 100k
    .venv/bin/python bench/engine.py --sizes 1000 10000 --baseline-max 10000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from engram_api.embeddings.bm25 import Bm25Encoder
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.memory.model import Memory, MemType, Source, Trust, content_hash
from engram_api.store.base import Match, MemoryStore, PointWrite
from engram_api.store.edge import EdgeStore
from engram_api.store.qdrant_server import QdrantServerStore

_VOCAB = (
    "deploy helm chart postgres redis cluster staging prod user prefers dark mode tea coffee "
    "meeting monday release branch review lint test flaky timeout retry queue backup restore "
    "kubernetes node pod secret rotate vault dashboard metrics alert pager oncall runbook"
)
WORDS = _VOCAB.split()
EDGE, GRAPH, EXACT, CLIENT = (
    "qdrant-edge, scan (before the graph)",
    "qdrant-edge, HNSW graph (default)",
    "qdrant-edge exact scan",
    "qdrant-client local (baseline)",
)
SCOPES = ["global", *[f"group:team-{i}" for i in range(8)], "dm"]


def synth(n: int, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(6, 16)))) + f" #{i}" for i in range(n)]


def points(texts: list[str]) -> list[PointWrite]:
    emb, bm25 = HashingEmbedder(384), Bm25Encoder()
    now = datetime.now(UTC)
    out = []
    for i, text in enumerate(texts):
        wid = str(uuid.uuid4())
        mem = Memory(
            id=str(uuid.uuid5(uuid.NAMESPACE_URL, wid)),
            content=text,
            scope=SCOPES[i % len(SCOPES)],
            mem_type=list(MemType)[i % 7],
            trust=Trust.medium,
            source=Source.agent_output,
            agent="bench",
            context="",
            created_at=now - timedelta(minutes=i),
            updated_at=now,
            write_id=wid,
            embedding_model="hash/384",
            content_hash=content_hash(text),
            # 10% archived in every scope; i % 10 would archive exactly the `global` scope.
            archived=(i // len(SCOPES)) % 10 == 0,
        )
        out.append(PointWrite(mem.id, emb.embed_one(text), bm25.document(text), mem.to_payload()))
    return out


def pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1] if len(samples) > 1 else samples[0]


async def searches(
    store: MemoryStore, qtexts: list[str], match: Match, res: dict[str, float]
) -> dict[str, float]:
    emb, bm25 = HashingEmbedder(384), Bm25Encoder()
    for mode in ("dense", "hybrid"):
        lat = []
        for q in qtexts:
            dense, sparse = emb.embed_one(q), bm25.query(q)
            t = time.perf_counter()
            await store.query(dense=dense, sparse=sparse, match=match, limit=10, mode=mode)  # type: ignore[arg-type]
            lat.append((time.perf_counter() - t) * 1000)
        res[f"{mode}_p50"], res[f"{mode}_p99"] = pct(lat, 50), pct(lat, 99)
    return res


async def searching_while(
    store: MemoryStore, work: asyncio.Task[bool], match: Match
) -> list[float]:
    """Hybrid searches every 10 ms until `work` is done: what a build costs live traffic."""
    emb, bm25 = HashingEmbedder(384), Bm25Encoder()
    qtexts, lat = synth(200, seed=5), []
    while not work.done():
        q = qtexts[len(lat) % len(qtexts)]
        t = time.perf_counter()
        await store.query(
            dense=emb.embed_one(q), sparse=bm25.query(q), match=match, limit=10, mode="hybrid"
        )
        lat.append((time.perf_counter() - t) * 1000)
        await asyncio.sleep(0.01)
    return lat


async def measure(
    store: MemoryStore, pts: list[PointWrite], queries: int, *, graph: bool = False
) -> list[dict[str, float]]:
    """One row per search state: as filled, and (embedded store) after its graph is built."""
    await store.open(384)
    t0 = time.perf_counter()
    for i in range(0, len(pts), 256):
        await store.upsert(pts[i : i + 256])
    bulk = len(pts) / (time.perf_counter() - t0)
    extra = points(synth(50, seed=99))
    adds = []
    for p in extra:
        t = time.perf_counter()
        await store.upsert([p])
        adds.append((time.perf_counter() - t) * 1000)
    qtexts = synth(queries, seed=3)
    match = Match(scopes=frozenset({"group:team-3", "global"}), archived=False)
    base = {"bulk_pts_s": bulk, "add_p50": pct(adds, 50), "add_p99": pct(adds, 99)}
    rows = [await searches(store, qtexts, match, dict(base))]
    if graph and isinstance(store, EdgeStore):
        t = time.perf_counter()
        build = asyncio.create_task(store.build_index())
        during = await searching_while(store, build, match)
        if not build.result():
            raise RuntimeError("the index build failed; see the log")
        graph = dict(base, build_s=time.perf_counter() - t)
        graph |= {"during_p50": pct(during, 50), "during_max": max(during)}
        rows.append(await searches(store, qtexts, match, graph))
    await store.close()
    return rows


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--baseline-max", type=int, default=100000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        pts = points(synth(n))
        with tempfile.TemporaryDirectory() as d:
            scan, built = await measure(EdgeStore(Path(d) / "edge"), pts, args.queries, graph=True)
        rows += [(EDGE, n, scan), (GRAPH, n, built)]
        with tempfile.TemporaryDirectory() as d:
            (exact,) = await measure(EdgeStore(Path(d) / "edge", exact=True), pts, args.queries)
        rows.append((EXACT, n, exact))
        if n <= args.baseline_max:
            q = max(10, args.queries // 10) if n >= 50000 else args.queries
            with tempfile.TemporaryDirectory() as d:
                (qc,) = await measure(QdrantServerStore("m", path=Path(d) / "qc"), pts, q)
            rows.append((CLIENT, n, qc))
    head = (
        "| store | N | bulk pts/s | add p50/p99 ms | dense search p50/p99 ms | hybrid p50/p99 ms |"
    )
    print(head)
    print("|---|---|---|---|---|---|")
    for name, n, r in rows:
        print(
            f"| {name} | {n:,} | {r['bulk_pts_s']:,.0f} | {r['add_p50']:.2f} / {r['add_p99']:.2f} "
            f"| {r['dense_p50']:.2f} / {r['dense_p99']:.2f} | {r['hybrid_p50']:.2f} / "
            f"{r['hybrid_p99']:.2f} |"
        )
    by = {(name, n): r for name, n, r in rows}
    for n in args.sizes:
        e, g, x = by[(EDGE, n)], by[(GRAPH, n)], by[(EXACT, n)]
        print(
            f"N={n:,}: graph built in {g['build_s']:.1f} s; hybrid searches meanwhile p50 "
            f"{g['during_p50']:.2f} ms, max {g['during_max']:.0f} ms (the swap)"
        )
        ratio = {k: (e[k] / g[k], x[k] / g[k]) for k in ("dense_p50", "hybrid_p50")}
        print(
            f"N={n:,}: the plain scan takes {ratio['dense_p50'][0]:.1f}x (dense) and "
            f"{ratio['hybrid_p50'][0]:.1f}x (hybrid) the time of the graph search; the exact "
            f"scan {ratio['dense_p50'][1]:.1f}x and {ratio['hybrid_p50'][1]:.1f}x"
        )
        if (CLIENT, n) in by:
            e, b = by[(GRAPH, n)], by[(CLIENT, n)]
            print(
                f"N={n:,}: edge dense search (graph) is {b['dense_p50'] / e['dense_p50']:.0f}x "
                "faster "
                f"(p50), bulk insert {e['bulk_pts_s'] / b['bulk_pts_s']:.1f}x faster"
            )
    g = by[(GRAPH, max(args.sizes))]
    worst = max(g["dense_p50"], g["hybrid_p50"])
    print(
        f"\ntarget: filtered search p50 <= 3 ms at {max(args.sizes):,}: dense "
        f"{g['dense_p50']:.2f} ms, hybrid {g['hybrid_p50']:.2f} ms, "
        f"{'met' if worst <= 3 else 'not met'}"
    )
    print("command: .venv/bin/python " + " ".join(["bench/engine.py", *sys.argv[1:]]))


if __name__ == "__main__":
    asyncio.run(main())

"""Recall of the embedded store's HNSW graph at scale, on real text embedded by the real model.

bench/retrieval.py measures retrieval quality on LoCoMo, but at ~6,000 memories per corpus a
filtered search there never reaches the graph (below qdrant-edge's full-scan threshold, the
matching points are scored directly). This script fills a collection with `--size` memories
spliced from LoCoMo's turns and facts (the head of one, the tail of another: LoCoMo's own
vocabulary and sentence shapes, as many distinct texts as asked for), embedded by the default
local model (MiniLM int8), and searches it with LoCoMo's questions embedded by the same model.
The filter is 2 of 10 scopes over active memories (18 % of the collection). `--corpus narrow`
fills it with word salads over 39 ops words instead, which the questions match only weakly:
where a graph walk steered by coarse codes loses its way.

Top-5 and top-10 overlap with an exact scan of the same collection, in the same run, for the
store as filled (a plain scan), after its graph is built (the default), and for the layout of
releases before 2026-11-30 (1-bit codes, 4x/min-80 rescoring), built the same way. The data is
read in place (CC BY-NC 4.0: never copied into this repo).

    .venv/bin/python bench/graph_recall.py                   # 100k memories, 300 questions
    .venv/bin/python bench/graph_recall.py --corpus narrow   # questions matching nothing well
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import qdrant_edge as qe
from corpora import questions, spliced, synth

from engram_api.embeddings.local import LocalEmbedder
from engram_api.store.base import DENSE, KEYWORD_INDEXES, Match, PointWrite, with_live_fields
from engram_api.store.edge import EdgeStore, edge_filter
from engram_api.store.edge_config import FULL_SCAN_THRESHOLD_KB

SCOPES = [f"group:{i}" for i in range(10)]
MATCH = Match(scopes=frozenset({"group:3", "group:4"}), archived=False)
LIMITS = (5, 10)

Found = dict[int, list[set[str]]]


async def search(
    top: Callable[[np.ndarray, int], Awaitable[set[str]]], queries: np.ndarray
) -> tuple[Found, float]:
    """Ids found for every query at every limit, and the p50 ms at the first limit."""
    found: Found = {k: [] for k in LIMITS}
    lat = []
    for q in queries:
        for k in LIMITS:
            t = time.perf_counter()
            found[k].append(await top(q, k))
            if k == LIMITS[0]:
                lat.append((time.perf_counter() - t) * 1000)
    return found, statistics.median(lat)


def store_top(store: EdgeStore) -> Callable[[np.ndarray, int], Awaitable[set[str]]]:
    async def top(q: np.ndarray, k: int) -> set[str]:
        hits = await store.query(dense=q, sparse=None, match=MATCH, limit=k, mode="dense")
        return {h.id for h in hits}

    return top


async def one_bit_layout(
    path: Path, pts: list[PointWrite], queries: np.ndarray
) -> tuple[Found, float]:
    """The shard earlier releases wrote and searched: 1-bit codes, 4x the limit (min 80)."""
    codes = qe.BinaryQuantizationConfig(
        memory=qe.Memory.Pinned, query_encoding=qe.BinaryQuantizationQueryEncoding.Scalar8Bits
    )
    vec = qe.EdgeVectorParams(
        size=queries.shape[1], distance=qe.Distance.Cosine, quantization_config=codes
    )
    config = qe.EdgeConfig(
        vectors={DENSE: vec},
        hnsw_config=qe.HnswIndexConfig(
            m=16, ef_construct=100, full_scan_threshold=FULL_SCAN_THRESHOLD_KB, payload_m=16
        ),
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
    )
    shard = qe.EdgeShard.create(str(path), config)
    # The same payload indexes and filter as the store, so only the codes and search differ.
    for name in KEYWORD_INDEXES:
        shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
    for i in range(0, len(pts), 1000):
        points = [
            qe.Point(p.id, {DENSE: np.asarray(p.dense).tolist()}, with_live_fields(p.payload))
            for p in pts[i : i + 1000]
        ]
        shard.update(qe.UpdateOperation.upsert_points(points))
    shard.optimize()
    flt = edge_filter(MATCH)

    async def top(q: np.ndarray, k: int) -> set[str]:
        params = qe.SearchParams(
            quantization=qe.QuantizationSearchParams(rescore=True, oversampling=max(4, 80 / k))
        )
        req = qe.QueryRequest(
            limit=k, query=qe.Query.Nearest(q.tolist(), using=DENSE), filter=flt, params=params
        )
        return {str(h.id) for h in shard.query(req)}

    try:
        return await search(top, queries)
    finally:
        shard.close()


def overlap(found: list[set[str]], truth: list[set[str]]) -> float:
    return float(np.mean([len(f & t) / max(1, len(t)) for f, t in zip(found, truth, strict=True)]))


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument(
        "--corpus",
        choices=["locomo", "narrow"],
        default="locomo",
        help="locomo: memories spliced from LoCoMo; narrow: word salads over 39 ops words, "
        "which LoCoMo's questions match only weakly (best cosine ~0.2): the hard case",
    )
    args = ap.parse_args()
    texts = (spliced if args.corpus == "locomo" else synth)(args.size, 7)
    model = LocalEmbedder.load()
    t = time.perf_counter()
    vectors: list[np.ndarray] = []
    for lo in range(0, len(texts), 10_000):
        vectors += await model.embed_documents(texts[lo : lo + 10_000])
        print(f"embedded {len(vectors):,} memories", file=sys.stderr, flush=True)
    queries = np.asarray(
        [await model.embed_query(q) for q in questions(args.questions, seed=3)], dtype=np.float32
    )
    model.close()
    print(f"embedded in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    pts = [
        PointWrite(
            str(uuid.UUID(int=i + 1)),
            v,
            None,
            {"scope": SCOPES[i % 10], "archived": int((i // 10) % 10 == 0)},
        )
        for i, v in enumerate(vectors)
    ]
    rows: list[tuple[str, Found, float]] = []
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as d:
        exact, edge = EdgeStore(Path(d) / "exact", exact=True), EdgeStore(Path(d) / "edge")
        for store in (exact, edge):
            await store.open(queries.shape[1])
            for i in range(0, len(pts), 500):
                await store.upsert(pts[i : i + 500])
        truth, exact_ms = await search(store_top(exact), queries)
        rows.append(("exact scan", truth, exact_ms))
        rows.append(("plain scan (before the graph)", *await search(store_top(edge), queries)))
        t = time.perf_counter()
        if not await edge.build_index():
            raise RuntimeError("the graph build failed; see the log")
        build_s = time.perf_counter() - t
        rows.append(
            ("**HNSW graph, int8 codes (default)**", *await search(store_top(edge), queries))
        )
        await exact.close()
        await edge.close()
        rows.append(
            ("HNSW graph, 1-bit codes (before)", *await one_bit_layout(Path(d) / "b", pts, queries))
        )
    print(
        f"{args.size:,} {args.corpus} memories, {len(queries)} questions, filter 18 %; "
        f"graph built in {build_s:.0f} s\n"
    )
    print("| search | top-5 overlap with exact | top-10 overlap | dense p50 ms (limit 5) |")
    print("|---|---:|---:|---:|")
    for name, found, ms in rows:
        top5, top10 = overlap(found[5], truth[5]), overlap(found[10], truth[10])
        print(f"| {name} | {top5:.3f} | {top10:.3f} | {ms:.2f} |")
    print("\ncommand: .venv/bin/python " + " ".join(["bench/graph_recall.py", *sys.argv[1:]]))


if __name__ == "__main__":
    asyncio.run(main())

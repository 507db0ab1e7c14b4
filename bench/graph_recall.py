"""Recall of the embedded store's HNSW graph at scale, on vectors with a real model's geometry.

bench/retrieval.py measures retrieval quality on LoCoMo, but at ~6,000 memories per corpus a
filtered search there never reaches the graph (below qdrant-edge's full-scan threshold, the
matching points are scored directly). This script builds a collection of `--size` vectors
from LoCoMo's texts embedded with the default local model (MiniLM int8): each text's vector
replicated with Gaussian noise (`--sigma` per dimension), so neighbourhoods are as dense and
as anisotropic as the model makes them. Queries are LoCoMo's questions, embedded by the same
model. The filter is 2 of 10 scopes over active memories (18 % of the collection), limit 10.

Top-10 overlap with an exact scan of the same collection, in the same run, for the default
store as filled (1-bit scan, rescored) and after its graph is built (graph walk, rescored).
The data is read in place (CC BY-NC 4.0: never copied into this repo).

    .venv/bin/python bench/graph_recall.py                   # 100k vectors, 500 questions
    .venv/bin/python bench/graph_recall.py --size 30000 --sigma 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from retrieval import DATA, load

from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.factory import build_embedder
from engram_api.store.base import Match, MemoryStore, PointWrite
from engram_api.store.edge import EdgeStore

SCOPES = [f"group:{i}" for i in range(10)]
MATCH = Match(scopes=frozenset({"group:3", "group:4"}), archived=False)


async def top10(store: MemoryStore, queries: np.ndarray) -> tuple[list[set[str]], float]:
    found, lat = [], []
    for q in queries:
        t = time.perf_counter()
        hits = await store.query(dense=q, sparse=None, match=MATCH, limit=10, mode="dense")
        lat.append((time.perf_counter() - t) * 1000)
        found.append({h.id for h in hits})
    return found, statistics.median(lat)


def overlap(found: list[set[str]], truth: list[set[str]]) -> float:
    return float(np.mean([len(f & t) / max(1, len(t)) for f, t in zip(found, truth, strict=True)]))


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--sigma", type=float, default=0.03, help="noise per dimension")
    ap.add_argument("--questions", type=int, default=500)
    args = ap.parse_args()
    obs, turns = load(DATA)
    texts = [d.text for d in obs.docs + turns.docs]
    questions = [q.text for q in obs.questions][: args.questions]
    model = build_embedder(EmbeddingSettings(primary=ProviderSettings(provider="local")))
    t = time.perf_counter()
    base = np.asarray(await model.embed_documents(texts), dtype=np.float32)
    queries = np.asarray([await model.embed_query(q) for q in questions], dtype=np.float32)
    await model.aclose()
    print(f"embedded {len(texts):,} texts in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    rng = np.random.default_rng(1)
    vectors = base[np.arange(args.size) % len(base)]
    vectors = vectors + rng.normal(0, args.sigma, vectors.shape).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = float(np.mean(np.sum(vectors[: len(base)] * base[: args.size], axis=1)))
    pts = [
        PointWrite(
            str(uuid.UUID(int=i + 1)),
            v,
            None,
            {"scope": SCOPES[i % 10], "archived": int((i // 10) % 10 == 0)},
        )
        for i, v in enumerate(vectors)
    ]
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as d:
        exact, edge = EdgeStore(Path(d) / "exact", exact=True), EdgeStore(Path(d) / "edge")
        for store in (exact, edge):
            await store.open(base.shape[1])
            for i in range(0, len(pts), 500):
                await store.upsert(pts[i : i + 500])
        truth, exact_ms = await top10(exact, queries)
        scan, scan_ms = await top10(edge, queries)
        t = time.perf_counter()
        if not await edge.build_index():
            raise RuntimeError("the graph build failed; see the log")
        build_s = time.perf_counter() - t
        graph, graph_ms = await top10(edge, queries)
        await exact.close()
        await edge.close()
    print(
        f"{args.size:,} vectors (cosine {cos:.2f} to their source text), {len(questions)} "
        f"questions, filter 18 %; graph built in {build_s:.0f} s\n"
    )
    print("| search | top-10 overlap with exact | dense p50 ms |")
    print("|---|---:|---:|")
    print(f"| exact scan | 1.000 | {exact_ms:.2f} |")
    before = "1-bit scan, rescored (before the graph)"
    print(f"| {before} | {overlap(scan, truth):.3f} | {scan_ms:.2f} |")
    print(f"| HNSW graph, rescored (default) | {overlap(graph, truth):.3f} | {graph_ms:.2f} |")
    print("\ncommand: .venv/bin/python " + " ".join(["bench/graph_recall.py", *sys.argv[1:]]))


if __name__ == "__main__":
    asyncio.run(main())

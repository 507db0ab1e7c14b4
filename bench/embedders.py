"""Embedder benchmark: load time, query latency and bulk throughput, local model vs hashing.

The default offline model (all-MiniLM-L6-v2 int8 on onnxruntime) is measured through the same
async methods the service calls (work runs on the embedder's worker thread), with its matrix
products in int8 (the default on CPUs with VNNI) and in fp32 (the packaged graph, the default
elsewhere); the hashing test embedder is the baseline in the same run. Texts are LoCoMo
questions (queries) and dialogue turns (bulk), read in place (CC BY-NC 4.0: never copied
into this repo).

    .venv/bin/python bench/embedders.py
    .venv/bin/python bench/embedders.py --bulk 5000 --queries 500 --batches 1 8 32
    .venv/bin/python bench/embedders.py --computes int8     # skip the fp32 rows
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engram_api.embeddings.base import Embedder
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.embeddings.local import LocalEmbedder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.json"

_LOAD = {
    "local-int8": "from engram_api.embeddings.local import LocalEmbedder; "
    "LocalEmbedder.load(compute='int8')",
    "local-fp32": "from engram_api.embeddings.local import LocalEmbedder; "
    "LocalEmbedder.load(compute='fp32')",
    "hash": "from engram_api.embeddings.hashing import HashingEmbedder; HashingEmbedder(384)",
}


def locomo_texts(path: Path) -> tuple[list[str], list[str]]:
    """(questions, dialogue turns as "Speaker: text")."""
    data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    questions: list[str] = []
    turns: list[str] = []
    for conv in data:
        questions += [str(q["question"]) for q in conv["qa"]]
        for key, session in conv["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns += [f"{t['speaker']}: {t['text']}" for t in session]
    return questions, turns


def load_seconds(kind: str, runs: int) -> float:
    """Import + build in a fresh process (warm page cache), median of ``runs``."""
    code = f"import time; t = time.perf_counter(); {_LOAD[kind]}; print(time.perf_counter() - t)"
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(runs)
    ]
    return statistics.median(times)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(embedder: Embedder, queries: list[str], bulk: list[str]) -> dict[str, float]:
    await embedder.embed_query("warm up")
    lat: list[float] = []
    for q in queries:
        t = time.perf_counter()
        await embedder.embed_query(q)
        lat.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    await embedder.embed_documents(bulk)
    elapsed = time.perf_counter() - t
    return {
        "p50": statistics.median(lat),
        "p99": percentile(lat, 0.99),
        "tps": len(bulk) / elapsed,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--queries", type=int, default=200, help="query latency samples")
    ap.add_argument("--bulk", type=int, default=2000, help="dialogue turns embedded in bulk")
    ap.add_argument("--batches", type=int, nargs="+", default=[8], help="local batch sizes")
    ap.add_argument("--load-runs", type=int, default=3)
    ap.add_argument("--computes", nargs="+", choices=["int8", "fp32"], default=["int8", "fp32"])
    args = ap.parse_args()

    questions, turns = locomo_texts(args.data)
    queries, bulk = questions[: args.queries], turns[: args.bulk]
    python = sys.version.split()[0]
    print(f"LoCoMo: {len(queries)} queries, {len(bulk)} turns in bulk; python {python}")

    rows: list[tuple[str, float, dict[str, float]]] = []
    for compute in args.computes:
        local_load = load_seconds(f"local-{compute}", args.load_runs)
        for batch in args.batches:
            local = LocalEmbedder.load(batch_size=batch, compute=compute)
            rows.append(
                (
                    f"local MiniLM-L6, {compute} compute, batch {batch}",
                    local_load,
                    await measure(local, queries, bulk),
                )
            )
            await local.aclose()
    rows.append(
        (
            "hash-384 (baseline)",
            load_seconds("hash", args.load_runs),
            await measure(HashingEmbedder(384), queries, bulk),
        )
    )

    print()
    print("| embedder | import+load s | query p50 ms | query p99 ms | bulk texts/s |")
    print("|---|---|---|---|---|")
    for name, load, m in rows:
        print(f"| {name} | {load:.2f} | {m['p50']:.2f} | {m['p99']:.2f} | {m['tps']:.0f} |")
    base = rows[-1][2]
    first = rows[0][2]
    print()
    print(
        f"local/hash ratios: query p50 {first['p50'] / base['p50']:.0f}x slower, "
        f"bulk {base['tps'] / first['tps']:.0f}x slower"
    )
    if len(args.computes) == 2:
        per = len(args.batches)
        for k, batch in enumerate(args.batches):
            i8, f32 = rows[k][2], rows[per + k][2]
            print(
                f"batch {batch}: int8 compute embeds {i8['tps'] / f32['tps']:.2f}x the texts/s "
                f"of fp32, query p50 {f32['p50'] / i8['p50']:.2f}x faster"
            )


if __name__ == "__main__":
    asyncio.run(main())

"""Weekly maintenance without an LLM at 10k and 100k memories: time per step.

    .venv/bin/python bench/maintenance.py [--sizes 10000 100000] [--per-scope 500]
        [--global-share 0.05] [--json]

Synthetic memories go straight into the embedded store (qdrant-edge, the default) with
synthetic unit vectors, so the figures measure maintenance, not embedding:
- scopes grow with the deployment (one per ~500 memories, plus global with 5%; both can be
  changed to see how one large scope costs: exact neighbour search is O(scope) per query);
- types: 30% task_log, 20% fact, 15% preference, 10% each lesson/decision/procedure,
  5% knowledge; ages uniform over 0-400 days;
- 8% are near-duplicates (cosine ~0.95, the same text with a full stop) of another memory of
  the same scope and type, 8% are related variants (cosine ~0.6, the same text with an
  antonym: a conflict candidate the statement checks read), and task logs come in routines
  of 4-12 similar logs (cosine ~0.7 to the routine). Texts are made of generated words, so
  every pair found is read by the statement checks (numbers, negation, antonyms, entities).
The run is a real ``run_maintenance(engine, "weekly", llm=None)``: dedup merges, conflicts
judge their candidates offline, consolidation distils task-log clusters extractively (writing
knowledge memories through the service), decay archives.
Goal on a 2-core machine: <= 120 s at 100k, and the 100k time <= 12x the 10k time.
The CPU seconds of the process are reported beside the wall time: on a shared machine they
move less with the load than the wall clock does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.maintenance.runner import run_maintenance
from engram_api.memory.model import Memory, Source, content_hash, utc_now
from engram_api.runtime import open_engine
from engram_api.settings import load_settings
from engram_api.store.base import PointWrite
from engram_contract.permissions import MemType, Trust

DIM = 384
TYPES = [
    (MemType.task_log, 0.30),
    (MemType.fact, 0.20),
    (MemType.preference, 0.15),
    (MemType.lesson, 0.10),
    (MemType.decision, 0.10),
    (MemType.procedure, 0.10),
    (MemType.knowledge, 0.05),
]
DUP_RATE = 0.08
RELATED_RATE = 0.08


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def near(rng: np.random.Generator, base: np.ndarray, cosine: float) -> np.ndarray:
    """A unit vector at about ``cosine`` from ``base``."""
    noise = unit(rng.standard_normal(DIM))
    noise = unit(noise - np.dot(noise, base) * base)
    return unit(cosine * base + np.sqrt(1 - cosine**2) * noise)


def generate(
    n: int, seed: int = 7, *, per_scope: int = 500, global_share: float = 0.05
) -> list[PointWrite]:
    rng = np.random.default_rng(seed)
    n_scopes = max(2, n // per_scope)
    scopes = ["global"] + [
        f"group:team-{i}" if i % 3 else f"agent:worker-{i}" for i in range(1, n_scopes)
    ]
    weights = np.array([global_share] + [(1 - global_share) / (n_scopes - 1)] * (n_scopes - 1))
    now = utc_now().timestamp()
    points: list[PointWrite] = []
    by_group: dict[tuple[str, MemType], list[int]] = {}
    routines: dict[str, tuple[np.ndarray, int]] = {}
    vectors: list[np.ndarray] = []
    texts: list[str] = []
    syllables = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "dor", "pi", "zan", "qua", "bex"]
    vocab = [a + b + c for a in syllables for b in syllables for c in ("n", "r", "s", "t")]

    def words(k: int) -> list[str]:
        return [vocab[int(x)] for x in rng.integers(len(vocab), size=k)]

    types = [t for t, _ in TYPES]
    probs = np.array([p for _, p in TYPES])
    for i in range(n):
        scope = scopes[int(rng.choice(len(scopes), p=weights))]
        mem_type = types[int(rng.choice(len(types), p=probs))]
        group = by_group.setdefault((scope, mem_type), [])
        roll = rng.random()
        if mem_type is MemType.task_log:
            centre, left = routines.get(scope, (np.zeros(DIM), 0))
            if left <= 0:
                centre, left = unit(rng.standard_normal(DIM)), int(rng.integers(4, 13))
            vec = near(rng, centre, 0.7)
            routines[scope] = (centre, left - 1)
        elif group and roll < DUP_RATE:
            j = group[int(rng.integers(len(group)))]
            vec, text = near(rng, vectors[j], 0.95), texts[j].rstrip(".") + "."
        elif group and roll < DUP_RATE + RELATED_RATE:
            j = group[int(rng.integers(len(group)))]
            vec, text = near(rng, vectors[j], 0.6), texts[j].replace("enabled", "disabled")
        else:
            vec = unit(rng.standard_normal(DIM))
        if mem_type is MemType.task_log:
            w = words(3)
            minutes = int(rng.integers(1, 60))
            text = f"Ran the {w[0]} job on {w[1]}; it finished after {minutes} minutes"
        elif not (group and roll < DUP_RATE + RELATED_RATE):
            w = words(4)
            text = f"The {w[0]} {w[1]} for {w[2]} is enabled by the {w[3]} team"
        texts.append(text)
        vectors.append(vec)
        group.append(i)
        created = now - float(rng.uniform(0, 400)) * 86_400
        content = text
        write_id = str(uuid.uuid4())
        mem = Memory(
            id=str(uuid.uuid5(uuid.NAMESPACE_URL, write_id)),
            content=content,
            scope=scope,
            mem_type=mem_type,
            trust=[Trust.low, Trust.medium, Trust.high][int(rng.integers(3))],
            source=Source.agent_output,
            agent="main",
            context="",
            created_at=utc_now().fromtimestamp(created, tz=utc_now().tzinfo),
            updated_at=utc_now(),
            write_id=write_id,
            embedding_model="hash/384",
            content_hash=content_hash(content),
            access_count=int(rng.poisson(1.0)),
        )
        points.append(PointWrite(id=mem.id, dense=vec, sparse=None, payload=mem.to_payload()))
    return points


async def bench(n: int, data_dir: Path, per_scope: int, global_share: float) -> dict[str, Any]:
    settings = load_settings(data_dir=data_dir, store={"mode": "embedded"})
    points = generate(n, per_scope=per_scope, global_share=global_share)
    async with open_engine(settings, background=False, embedder=HashingEmbedder(DIM)) as engine:
        t0 = time.monotonic()
        for i in range(0, len(points), 2000):
            await engine.store.upsert(points[i : i + 2000])
        load_s = time.monotonic() - t0
        cpu0 = time.process_time()
        report = await run_maintenance(engine, "weekly", llm=None)
        cpu_s = time.process_time() - cpu0
    steps = {s.name: s for s in report.steps}
    return {
        "memories": n,
        "load_s": round(load_s, 2),
        "total_s": round(report.elapsed_s, 2),
        "cpu_s": round(cpu_s, 2),
        "steps_s": {k: round(s.elapsed_s, 2) for k, s in steps.items()},
        "merged": steps["dedup"].counts.get("merged", 0),
        "conflict_pairs": steps["conflicts"].counts.get("candidate_pairs", 0),
        "clusters": steps["consolidation"].counts.get("clusters", 0),
        "consolidated": steps["consolidation"].counts.get("consolidated_clusters", 0),
        "ambiguous": steps["conflicts"].counts.get("ambiguous", 0),
        "decayed": steps["decay"].counts.get("archived", 0),
        "result": report.result.value,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--per-scope", type=int, default=500, help="memories per scope")
    ap.add_argument("--global-share", type=float, default=0.05, help="share in scope global")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
            rows.append(asyncio.run(bench(n, Path(tmp), args.per_scope, args.global_share)))
        print(f"  {n} memories: {rows[-1]['total_s']} s", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    names = list(rows[0]["steps_s"])
    head = ["memories", *names, "weekly total", "CPU", "merged", "band pairs", "clusters"]
    head += ["consolidated", "ambiguous", "decayed"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [str(r["memories"]), *(f"{r['steps_s'][k]:.2f} s" for k in names)]
        cells += [f"{r['total_s']:.2f} s", f"{r['cpu_s']:.2f} s", str(r["merged"])]
        cells.append(str(r["conflict_pairs"]))
        cells += [str(r["clusters"]), str(r["consolidated"]), str(r["ambiguous"])]
        cells.append(str(r["decayed"]))
        print("| " + " | ".join(cells) + " |")
    if len(rows) >= 2:
        ratio = rows[-1]["total_s"] / max(rows[0]["total_s"], 1e-9)
        scale = rows[-1]["memories"] / rows[0]["memories"]
        cpu = rows[-1]["cpu_s"] / max(rows[0]["cpu_s"], 1e-9)
        print(
            f"\n{rows[-1]['memories']} / {rows[0]['memories']}: time x{ratio:.1f} "
            f"(CPU x{cpu:.1f}) for x{scale:g}"
        )
    print("command: .venv/bin/python bench/maintenance.py " + " ".join(sys.argv[1:]))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

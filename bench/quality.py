"""Dedup, conflict detection and offline resolution on the labelled lifecycle corpus.

    .venv/bin/python bench/quality.py [--corpus tests/corpora/lifecycle.yaml] [--json]
        [--lang en|zh]

Every labelled pair (tests/corpora/lifecycle.yaml: duplicates, contradictions, related
distinct pairs; English and Chinese; long memories sharing openings) is stored through the
real service in a scope of its own, embedded by the default offline model, and a real weekly
maintenance runs without an LLM (the embedded default). The outcome of each pair is read back
from the store. Goals: duplicate recall >= 0.90; 0 distinct pairs or contradictions merged;
>= 0.80 of contradictions resolved with the survivor their type's policy names (or, for
decision/lesson/knowledge, kept both and flagged); 0 in the wrong direction.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from engram_api.maintenance import corpus
from engram_api.maintenance.runner import run_maintenance
from engram_api.runtime import open_engine
from engram_api.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent


async def measure(path: Path, lang: str | None) -> dict[str, Any]:
    pairs = [p for p in corpus.load(path) if lang is None or p.lang == lang]
    with tempfile.TemporaryDirectory(prefix="engram-quality-") as tmp:
        settings = load_settings(data_dir=Path(tmp), store={"mode": "embedded"})
        async with open_engine(settings, background=False) as engine:
            started = time.monotonic()
            ids = await corpus.store_pairs(engine, pairs)
            stored_s = time.monotonic() - started
            report = await run_maintenance(engine, "weekly", llm=None)
            res = await corpus.outcomes(engine, pairs, ids)
            model = engine.embedder.model_id
    figures = res.figures()
    misses = {
        label: [
            f"{p.id}: {o}"
            for p, o in res.of(label)  # type: ignore[arg-type]
            if (label == "duplicate" and o != "merged")
            or (label == "distinct" and o not in ("kept", "flagged"))
            or (
                label == "contradiction"
                and not (o == "resolved_right" or (p.survivor == "both" and o == "flagged"))
            )
        ]
        for label in ("duplicate", "contradiction", "distinct")
    }
    return {
        "model": model,
        "corpus": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "languages": dict(Counter(p.lang for p in pairs)),
        **figures,
        "outcomes": dict(Counter(res.outcomes.values())),
        "store_s": round(stored_s, 1),
        "maintenance_s": round(report.elapsed_s, 1),
        "not_as_labelled": misses,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests/corpora/lifecycle.yaml")
    ap.add_argument("--lang", choices=["en", "zh"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = asyncio.run(measure(a.corpus, a.lang))
    if a.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    for k, v in out.items():
        if k != "not_as_labelled":
            print(f"{k:40} {v}")
    for label, items in out["not_as_labelled"].items():
        print(f"not as labelled ({label}): {len(items)}")
        for item in items:
            print(f"  {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

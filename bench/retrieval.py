"""Retrieval quality on LoCoMo: recall@5/@10 and MRR for dense, sparse (BM25) and hybrid (RRF).

Each conversation is its own scope in one embedded store, and every question searches only its
conversation's scope, exactly as the engine does. Two corpora: LoCoMo's one-sentence
observations (closest to Engram memories) and the raw dialogue turns. Questions of
categories 1-4. The data is read in place (CC BY-NC 4.0: never copied into this repo).

    .venv/bin/python bench/retrieval.py                       # default local embedder
    .venv/bin/python bench/retrieval.py --embedder hash       # the test embedder, for contrast
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram_api.embeddings.bm25 import Bm25Encoder
from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.factory import build_embedder
from engram_api.store.base import Match, PointWrite, SearchMode
from engram_api.store.edge import EdgeStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.json"
_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
MODES: tuple[SearchMode, ...] = ("dense", "sparse", "hybrid")


def norm_ids(raw: Any) -> set[str]:
    items = raw if isinstance(raw, list) else [raw]
    out: set[str] = set()
    for item in items:
        for a, b in _ID.findall(str(item)):
            out.add(f"D{int(a)}:{int(b)}")
    return out


@dataclass
class Doc:
    scope: str
    text: str
    dia_ids: set[str]


@dataclass
class Question:
    scope: str
    text: str
    gold: set[str]


@dataclass
class Corpus:
    name: str
    docs: list[Doc] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def load(path: Path) -> tuple[Corpus, Corpus]:
    convs = json.loads(path.read_text())
    obs, turns = Corpus("observations"), Corpus("turns")
    for conv in convs:
        scope = f"group:{conv['sample_id']}"
        seen_obs_ids: set[str] = set()
        for key, by_speaker in conv["observation"].items():
            if not key.endswith("_observation"):
                continue
            for facts in by_speaker.values():
                for fact in facts:
                    ids = norm_ids(fact[1:])
                    obs.docs.append(Doc(scope, fact[0], ids))
                    seen_obs_ids |= ids
        for key, session in conv["conversation"].items():
            if not re.fullmatch(r"session_\d+", key):
                continue
            for turn in session:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares a photo of {turn['blip_caption']}]"
                turns.docs.append(Doc(scope, text, norm_ids(turn["dia_id"])))
        for qa in conv["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            gold = norm_ids(qa.get("evidence", []))
            if gold:
                turns.questions.append(Question(scope, qa["question"], gold))
            if gold & seen_obs_ids:
                obs.questions.append(Question(scope, qa["question"], gold & seen_obs_ids))
    return obs, turns


async def evaluate(corpus: Corpus, embedder: Any, workdir: Path) -> dict[str, dict[str, float]]:
    bm25 = Bm25Encoder()
    t0 = time.perf_counter()
    vectors = await embedder.embed_documents([d.text for d in corpus.docs])
    embed_s = time.perf_counter() - t0
    store = EdgeStore(workdir / corpus.name)
    await store.open(embedder.dimension)
    ids = [str(uuid.uuid4()) for _ in corpus.docs]
    by_id = {i: d for i, d in zip(ids, corpus.docs, strict=True)}
    pts = [
        PointWrite(i, v, bm25.document(d.text), {"scope": d.scope, "archived": 0})
        for i, v, d in zip(ids, vectors, corpus.docs, strict=True)
    ]
    for k in range(0, len(pts), 256):
        await store.upsert(pts[k : k + 256])
    results: dict[str, dict[str, float]] = {}
    for mode in MODES:
        r5 = r10 = mrr = 0.0
        t1 = time.perf_counter()
        for q in corpus.questions:
            hits = await store.query(
                dense=await embedder.embed_query(q.text) if mode != "sparse" else None,
                sparse=bm25.query(q.text),
                match=Match(scopes=frozenset({q.scope})),
                limit=50,
                mode=mode,
            )
            ranked = [by_id[h.id].dia_ids for h in hits]
            r5 += len(q.gold & set().union(*ranked[:5])) / len(q.gold)
            r10 += len(q.gold & set().union(*ranked[:10])) / len(q.gold)
            first = next((i for i, ids_ in enumerate(ranked, 1) if ids_ & q.gold), None)
            mrr += 1 / first if first else 0.0
        n = len(corpus.questions)
        results[mode] = {
            "R@5": r5 / n,
            "R@10": r10 / n,
            "MRR": mrr / n,
            "query_ms": (time.perf_counter() - t1) / n * 1000,
        }
    results["_"] = {
        "docs": len(corpus.docs),
        "questions": len(corpus.questions),
        "embed_s": embed_s,
    }
    await store.close()
    return results


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--embedder", default="local", choices=["local", "hash"])
    args = ap.parse_args()
    embedder = build_embedder(EmbeddingSettings(primary=ProviderSettings(provider=args.embedder)))
    obs, turns = load(args.data)
    print(f"embedder: {embedder.model_id}; data: {args.data}")
    print("| corpus | mode | R@5 | R@10 | MRR@50 | ms/query |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for corpus in (obs, turns):
            res = await evaluate(corpus, embedder, Path(d))
            meta = res.pop("_")
            for mode, r in res.items():
                print(
                    f"| {corpus.name} ({int(meta['docs'])} docs, {int(meta['questions'])} q) "
                    f"| {mode} | {r['R@5']:.3f} | {r['R@10']:.3f} | {r['MRR']:.3f} "
                    f"| {r['query_ms']:.1f} |"
                )
    await embedder.aclose()


if __name__ == "__main__":
    asyncio.run(main())

"""Retrieval quality: the bilingual corpus (ours) and LoCoMo, per mode and fusion, per model.

- bilingual (bench/corpora/bilingual.yaml, written for Engram): 150 memories in Chinese,
  English or both, across types and scopes, in one store; each query searches every scope.
  Top-1 / top-5 accuracy per query language (zh, en, mixed) and mode (dense, sparse, hybrid).
- LoCoMo: each conversation is its own scope in one embedded store, and every question
  searches only its conversation's scope, exactly as the engine does. Two corpora: LoCoMo's
  one-sentence observations (closest to Engram memories) and the raw dialogue turns, questions
  of categories 1-4; R@5 / R@10 / MRR. ``--locomo-half`` picks conversations 1-5 ("first", where
  fusion is tuned) or 6-10 ("second", the held-out half). The data is read in place (CC BY-NC
  4.0: never copied into this repo).

The old default (all-MiniLM-L6-v2-int8 with the v1 BM25 tokenisation) and the new one
(multilingual-e5-small-q4 with CJK bigrams) are measured in one run:

    .venv/bin/python bench/retrieval.py                          # both corpora, old and new
    .venv/bin/python bench/retrieval.py --corpus bilingual --fusion rrf:5,rrf:60,dbsf
    .venv/bin/python bench/retrieval.py --corpus locomo --locomo-half first --fusion rrf:2,rrf:5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engram_api.embeddings.bm25 import TOKENIZER, Bm25Encoder
from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.factory import build_embedder
from engram_api.store.base import Fusion, Match, PointWrite, SearchMode
from engram_api.store.edge import EdgeStore

# ../shared/data beside the repo (main checkout) or beside the worktrees' parent.
DATA = next(
    (
        p / "shared" / "data" / "locomo10.json"
        for p in Path(__file__).resolve().parents
        if (p / "shared" / "data" / "locomo10.json").exists()
    ),
    Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.json",
)
BILINGUAL = Path(__file__).resolve().parent / "corpora" / "bilingual.yaml"
OLD = "local/all-MiniLM-L6-v2-int8"
NEW = "local/multilingual-e5-small-q4"
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


def load(path: Path, half: str = "all") -> tuple[Corpus, Corpus]:
    convs = json.loads(path.read_text())
    if half != "all":
        convs = convs[: len(convs) // 2] if half == "first" else convs[len(convs) // 2 :]
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


_VECTORS: dict[tuple[int, str], list[Any]] = {}


async def evaluate(
    corpus: Corpus,
    embedder: Any,
    workdir: Path,
    *,
    bm25: Bm25Encoder | None = None,
    fusion: Fusion | None = None,
    modes: tuple[SearchMode, ...] = MODES,
) -> dict[str, dict[str, float]]:
    bm25 = bm25 or Bm25Encoder()
    t0 = time.perf_counter()
    key = (id(corpus), embedder.model_id)
    if key not in _VECTORS:  # one embedding per corpus and model, whatever the fusions tried
        _VECTORS[key] = await embedder.embed_documents([d.text for d in corpus.docs])
    vectors = _VECTORS[key]
    embed_s = time.perf_counter() - t0
    store = EdgeStore(workdir / f"{corpus.name}-{uuid.uuid4().hex[:8]}")
    store.fusion = fusion or Fusion()
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
    for mode in modes:
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


@dataclass
class Memory:
    id: str
    content: str
    scope: str
    mem_type: str
    queries: dict[str, str]  # language -> query


def load_bilingual(path: Path = BILINGUAL) -> list[Memory]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))["memories"]
    return [
        Memory(
            m["id"],
            m["content"],
            m["scope"],
            m["type"],
            {lang: m[lang] for lang in LANGS if lang in m},
        )
        for m in raw
    ]


LANGS = ("zh", "en", "mixed")


async def evaluate_bilingual(
    memories: list[Memory],
    embedder: Any,
    workdir: Path,
    *,
    bm25: Bm25Encoder,
    fusions: list[Fusion],
    modes: tuple[SearchMode, ...] = MODES,
) -> dict[tuple[str, str], dict[str, float]]:
    """(mode or hybrid fusion, language) -> top-1, top-5 and ms/query."""
    vectors = await embedder.embed_documents([m.content for m in memories])
    store = EdgeStore(workdir / f"bilingual-{uuid.uuid4().hex[:8]}")
    await store.open(embedder.dimension)
    await store.upsert(
        [
            PointWrite(
                str(uuid.uuid5(uuid.NAMESPACE_URL, m.id)),
                v,
                bm25.document(m.content),
                {"scope": m.scope, "archived": 0, "mem_type": m.mem_type},
            )
            for m, v in zip(memories, vectors, strict=True)
        ]
    )
    by_point = {str(uuid.uuid5(uuid.NAMESPACE_URL, m.id)): m.id for m in memories}
    everything = Match(scopes=frozenset(m.scope for m in memories))
    queries = [(lang, m.id, q) for m in memories for lang, q in m.queries.items()]
    dense = {q: await embedder.embed_query(q) for _, _, q in queries}
    runs: list[tuple[str, SearchMode, Fusion]] = [
        (str(f) if mode == "hybrid" and len(fusions) > 1 else mode, mode, f)
        for mode in modes
        for f in (fusions if mode == "hybrid" else fusions[:1])
    ]
    out: dict[tuple[str, str], dict[str, float]] = {}
    for label, mode, fusion in runs:
        store.fusion = fusion
        for lang in LANGS:
            top1 = top5 = 0
            asked = [(gold, q) for lg, gold, q in queries if lg == lang]
            t0 = time.perf_counter()
            for gold, q in asked:
                hits = await store.query(
                    dense=dense[q] if mode != "sparse" else None,
                    sparse=bm25.query(q),
                    match=everything,
                    limit=5,
                    mode=mode,
                )
                ranked = [by_point[h.id] for h in hits]
                top1 += bool(ranked) and ranked[0] == gold
                top5 += gold in ranked
            n = max(len(asked), 1)
            out[(label, lang)] = {
                "top1": top1 / n,
                "top5": top5 / n,
                "n": len(asked),
                "ms": (time.perf_counter() - t0) / n * 1000,
            }
    await store.close()
    return out


def _embedder(model: str) -> Any:
    provider, _, name = model.partition("/")
    return build_embedder(
        EmbeddingSettings(primary=ProviderSettings(provider=provider, model=name))  # type: ignore[arg-type]
    )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--corpus", default="bilingual,locomo", help="bilingual and/or locomo")
    ap.add_argument("--models", default=f"{OLD},{NEW}", help="comma-separated; or hash/")
    ap.add_argument("--fusion", default="rrf:5", help="comma-separated rrf:K / dbsf for hybrid")
    ap.add_argument("--locomo-half", default="all", choices=["all", "first", "second"])
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    fusions = [Fusion.parse(f) for f in args.fusion.split(",")]
    modes = tuple(m for m in args.modes.split(",") if m in MODES)
    corpora = set(args.corpus.split(","))
    print(f"load average: {os.getloadavg()} (shared machine: timings are indicative)")
    with tempfile.TemporaryDirectory() as d:
        for model in args.models.split(","):
            embedder = _embedder(model)
            # The old default ran BM25 without CJK segmentation; every other model with it.
            bm25 = Bm25Encoder(cjk=embedder.model_id != OLD)
            tok = "v1 (no CJK)" if embedder.model_id == OLD else TOKENIZER
            if "bilingual" in corpora:
                res = await evaluate_bilingual(
                    load_bilingual(), embedder, Path(d), bm25=bm25, fusions=fusions, modes=modes
                )
                print(f"\n### bilingual: {embedder.model_id}, BM25 {tok}\n")
                print(
                    "| mode | zh top-1 | zh top-5 | en top-1 | en top-5 | mixed top-1 "
                    "| mixed top-5 | ms/query |"
                )
                print("|---|---|---|---|---|---|---|---|")
                for label in dict.fromkeys(k[0] for k in res):
                    cells = " | ".join(
                        f"{res[(label, lang)]['top1']:.3f} | {res[(label, lang)]['top5']:.3f}"
                        for lang in LANGS
                    )
                    ms = sum(res[(label, lang)]["ms"] for lang in LANGS) / len(LANGS)
                    print(f"| {label} | {cells} | {ms:.1f} |")
            if "locomo" in corpora:
                obs, turns = load(args.data, args.locomo_half)
                print(f"\n### LoCoMo ({args.locomo_half}): {embedder.model_id}, BM25 {tok}\n")
                print("| corpus | mode | R@5 | R@10 | MRR@50 | ms/query |")
                print("|---|---|---|---|---|---|")
                for corpus in (obs, turns):
                    for i, fusion in enumerate(fusions):
                        run_modes = modes if i == 0 else ("hybrid",)
                        r = await evaluate(
                            corpus, embedder, Path(d), bm25=bm25, fusion=fusion, modes=run_modes
                        )
                        meta = r.pop("_")
                        for mode, v in r.items():
                            label = f"hybrid {fusion}" if mode == "hybrid" else mode
                            print(
                                f"| {corpus.name} ({int(meta['docs'])} docs, "
                                f"{int(meta['questions'])} q) | {label} | {v['R@5']:.3f} "
                                f"| {v['R@10']:.3f} | {v['MRR']:.3f} | {v['query_ms']:.1f} |"
                            )
            await embedder.aclose()


if __name__ == "__main__":
    asyncio.run(main())

"""The embedded store's quantized search: near-exact results, exact scores, an exact switch."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.embeddings.local import LocalEmbedder
from engram_api.runtime import build_store
from engram_api.settings import EngramSettings, StoreSettings
from engram_api.store.base import DENSE, SPARSE, Match, MemoryStore, PointWrite, StoredPoint
from engram_api.store.edge import EdgeStore

DIM = 384
LIVE = Match(scopes=frozenset({"group:a"}), archived=False)


WHO = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy"]
DID = [
    "prefers", "dislikes", "deployed", "fixed", "reviewed", "wrote docs for", "is on call for",
    "benchmarked", "migrated", "rolled back",
]  # fmt: skip
WHAT = [
    "the postgres cluster", "the helm chart", "dark mode", "the redis cache", "the nightly backup",
    "the billing service", "the kafka consumer", "the login page", "the search index",
    "the CI pipeline", "the staging namespace", "the TLS certificates", "the grafana dashboard",
]  # fmt: skip
WHEN = ["on Monday", "last week", "after the outage", "before the release", "in production"]


async def sentence_vectors(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Real model vectors: quantized scores are only as good as the model's spread allows."""
    rng = np.random.default_rng(seed)
    memories = [
        f"{rng.choice(WHO)} {rng.choice(DID)} {rng.choice(WHAT)} {rng.choice(WHEN)}"
        for _ in range(1500)
    ]
    questions = [f"who {rng.choice(DID)} {rng.choice(WHAT)}?" for _ in range(40)]
    model = LocalEmbedder.load()
    try:
        docs = await model.embed_documents(memories)
        queries = await model.embed_documents(questions)
    finally:
        await model.aclose()
    return np.asarray(docs, dtype=np.float32), np.asarray(queries, dtype=np.float32)


async def fill(store: MemoryStore, vectors: np.ndarray) -> None:
    await store.upsert(
        [
            PointWrite(
                str(uuid.uuid4()),
                v,
                None,
                {"scope": "group:a" if i % 2 else "group:b", "archived": 0},
            )
            for i, v in enumerate(vectors)
        ]
    )


async def top10(store: MemoryStore, queries: np.ndarray) -> list[list[StoredPoint]]:
    return [
        await store.query(dense=q, sparse=None, match=LIVE, limit=10, mode="dense") for q in queries
    ]


def overlap(a: list[list[StoredPoint]], b: list[list[StoredPoint]]) -> float:
    return float(
        np.mean(
            [len({h.id for h in x} & {h.id for h in y}) / 10 for x, y in zip(a, b, strict=True)]
        )
    )


async def test_quantized_search_keeps_the_exact_top_results_with_exact_scores(
    tmp_path: Path,
) -> None:
    path = tmp_path / "edge"
    store = EdgeStore(path)
    await store.open(DIM)
    docs, queries = await sentence_vectors(seed=5)
    await fill(store, docs)
    # Quantized codes are written by an index build; before it a search scans full vectors.
    assert await store.build_index() is True
    approx = await top10(store, queries)
    await store.close()
    exact_store = EdgeStore(path, exact=True)
    await exact_store.open(DIM)
    exact = await top10(exact_store, queries)
    await exact_store.close()

    assert overlap(approx, exact) >= 0.98
    for a, e in zip(approx, exact, strict=True):
        true_score = {h.id: h.score for h in e}
        # Candidates are rescored with the full vectors: a shared hit has the exact cosine.
        assert all(abs(h.score - true_score[h.id]) < 1e-4 for h in a if h.id in true_score)
        assert [h.score for h in a] == sorted((h.score for h in a), reverse=True)


@pytest.mark.parametrize(("provider", "exact_search"), [("hash", None), ("local", True)])
async def test_the_store_searches_exactly_for_the_hash_embedder_or_when_configured(
    tmp_path: Path, provider: str, exact_search: bool | None
) -> None:
    settings = EngramSettings(
        data_dir=tmp_path / "data",
        store=StoreSettings(exact_search=exact_search),
        embeddings=EmbeddingSettings(primary=ProviderSettings(provider=provider)),
    )
    store = build_store(settings)
    await store.open(DIM)
    # Feature-hashed word bags: mostly-zero vectors, which quantize poorly (1-bit codes kept
    # ~65% of this top 10).
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(40)]
    emb = HashingEmbedder(DIM)
    vectors = np.stack(
        [emb.embed_one(" ".join(rng.choice(words, size=8))) for _ in range(3000)]
    ).astype(np.float32)
    await fill(store, vectors)
    queries = np.stack([emb.embed_one(" ".join(rng.choice(words, size=6))) for _ in range(30)])
    got = await top10(store, queries)
    await store.close()

    live = vectors[1::2]
    for q, hits in zip(queries, got, strict=True):
        brute = np.sort(live @ q)[::-1][:10]
        assert np.allclose([h.score for h in hits], brute, atol=1e-4)


async def test_a_store_made_before_quantization_opens_and_searches_exactly_as_before(
    tmp_path: Path,
) -> None:
    path = tmp_path / "edge"
    # The layout of earlier Engram versions: no quantization, default memory placement.
    old = qe.EdgeShard.create(
        str(path),
        qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        ),
    )
    emb = HashingEmbedder(DIM)
    ids = [str(uuid.uuid4()) for _ in range(3)]
    texts = ["deploy the helm chart", "rotate the vault secret", "user prefers dark mode"]
    old.update(
        qe.UpdateOperation.upsert_points(
            [
                qe.Point(i, {DENSE: emb.embed_one(t).tolist()}, {"scope": "group:a", "archived": 0})
                for i, t in zip(ids, texts, strict=True)
            ]
        )
    )
    old.close()

    store = EdgeStore(path)
    await store.open(DIM)
    await fill(store, np.stack([emb.embed_one("a newer memory about coffee")]))
    hits = await store.query(
        dense=emb.embed_one("vault secret rotation"),
        sparse=None,
        match=Match(scopes=frozenset({"group:a"}), archived=None),
        limit=2,
        mode="dense",
    )
    await store.close()
    assert hits[0].id == ids[1]
    assert hits[0].score == pytest.approx(
        float(emb.embed_one("vault secret rotation") @ emb.embed_one(texts[1])), abs=1e-4
    )

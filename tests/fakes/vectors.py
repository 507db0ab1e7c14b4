"""Deterministic fake embeddings: the hashing embedder's vector, scaled so it is not unit length
(clients must normalise what a remote API returns)."""

from __future__ import annotations

from engram_api.embeddings.hashing import HashingEmbedder

SCALE = 3.0


def fake_vector(text: str, dimension: int) -> list[float]:
    return [float(x) * SCALE for x in HashingEmbedder(dimension).embed_one(text)]

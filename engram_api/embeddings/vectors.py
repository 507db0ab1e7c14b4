"""Checking vectors that come back from a remote provider before anything stores them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engram_api.embeddings.base import EmbeddingError, Vector


def unit_vectors(raw: Sequence[Sequence[float]], *, expected: int, dimension: int) -> list[Vector]:
    """``raw`` as unit-length float32 vectors, or :class:`EmbeddingError` (malformed).

    Providers that shorten vectors (Gemini's output_dimensionality, OpenAI's ``dimensions``)
    do not always normalise them, so every vector is normalised here.
    """
    if len(raw) != expected:
        raise EmbeddingError(
            f"provider returned {len(raw)} vectors for {expected} texts", kind="malformed"
        )
    out: list[Vector] = []
    for values in raw:
        vec = np.asarray(values, dtype=np.float32)
        if vec.ndim != 1 or vec.shape[0] != dimension:
            got = vec.shape[0] if vec.ndim == 1 else vec.shape
            raise EmbeddingError(
                f"provider returned a vector of dimension {got}, configured {dimension}",
                kind="malformed",
            )
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise EmbeddingError("provider returned a zero or non-finite vector", kind="malformed")
        out.append(vec / norm)
    return out

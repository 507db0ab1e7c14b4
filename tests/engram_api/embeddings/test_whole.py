"""Long inputs are embedded whole over the provider's token window, not truncated."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.embeddings.local import LocalEmbedder
from engram_api.embeddings.whole import OVERLAP, WholeTextEmbedder, whole, windows

OPENING = " ".join(
    f"The {s} service keeps its values in deploy/{s}.yaml and pages the platform on-call."
    for s in ["billing", "search", "ingest", "reports", "gateway", "audit", "media"] * 6
)


@pytest.fixture(scope="module")
def model() -> Iterator[LocalEmbedder]:
    m = LocalEmbedder.load()
    yield m
    m.close()


def test_windows_cover_every_token_with_an_overlap() -> None:
    text = " ".join(str(i) for i in range(100))
    spans = []
    at = 0
    for word in text.split():
        spans.append((at, at + len(word)))
        at += len(word) + 1
    got = windows(text, spans, 40)
    assert got[0][0].startswith("0 ")
    assert got[-1][0].endswith(" 99")
    assert all(n <= 40 for _, n in got)
    assert len(got) == 1 + -(-(100 - 40) // (40 - OVERLAP))


async def test_texts_sharing_a_long_opening_get_different_vectors(model: LocalEmbedder) -> None:
    a, b = OPENING + " Failover: promote the replica.", OPENING + " Renew the certificates."
    assert len(model.token_spans(OPENING)) > 2 * model.max_tokens
    truncated = await model.embed_documents([a, b])
    assert float(truncated[0] @ truncated[1]) > 0.9999  # what the window alone sees
    wa, wb = await WholeTextEmbedder(model).embed_documents([a, b])
    assert float(wa @ wb) < 0.999
    assert abs(float(np.linalg.norm(wa)) - 1.0) < 1e-5


async def test_short_texts_are_embedded_exactly_as_before(model: LocalEmbedder) -> None:
    [plain] = await model.embed_documents(["The user prefers dark mode"])
    [wrapped] = await WholeTextEmbedder(model).embed_documents(["The user prefers dark mode"])
    assert np.array_equal(plain, wrapped)


def test_a_provider_without_a_token_window_is_left_as_it_is() -> None:
    h = HashingEmbedder(384)
    assert whole(h) is h

"""Embed a text longer than the model's token window whole: chunk it, embed each chunk, pool.

A model silently truncates at its window (all-MiniLM-L6-v2: 256 tokens, ~1,100 characters of
English), so five 5k-character memories sharing a 4.8k-character opening used to get the same
vector. Any provider that says how it tokenises (:class:`TokenWindow`) gets its long inputs cut
into windows on token boundaries, with a small overlap so no sentence is only ever seen cut in
half; the vectors are averaged weighted by each window's token count and re-normalised. Text
within the window is embedded exactly as before, in the same batch call.

This works over the provider interface only, so it serves any local model: the provider gives
``max_tokens`` and ``token_spans(text)`` (character offsets of its tokens, no special tokens).
Remote providers that declare no window are passed through (their windows hold 8k tokens and
more, beyond the 8,000-character content limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np

from engram_api.embeddings.base import Embedder, Vector

# Tokens shared by consecutive windows.
OVERLAP: Final = 32


@runtime_checkable
class TokenWindow(Protocol):
    @property
    def max_tokens(self) -> int:
        """Tokens of text one input may hold (special tokens already taken off)."""
        ...

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character offsets of every token of ``text``, untruncated."""
        ...


def windows(text: str, spans: Sequence[tuple[int, int]], size: int) -> list[tuple[str, int]]:
    """``text`` cut into pieces of at most ``size`` tokens: (piece, its token count)."""
    if len(spans) <= size:
        return [(text, max(len(spans), 1))]
    step = max(size - OVERLAP, 1)
    out: list[tuple[str, int]] = []
    start = 0
    while start < len(spans):
        end = min(start + size, len(spans))
        out.append((text[spans[start][0] : spans[end - 1][1]], end - start))
        if end == len(spans):
            break
        start += step
    return out


def pool(vectors: Sequence[Vector], weights: Sequence[int]) -> Vector:
    w = np.asarray(weights, dtype=np.float32)[:, None]
    mean = (np.stack(vectors) * w).sum(axis=0) / w.sum()
    norm = float(np.linalg.norm(mean))
    out: Vector = (mean / max(norm, 1e-12)).astype(np.float32)
    return out


class WholeTextEmbedder:
    """An :class:`Embedder` that embeds every input whole over ``inner``'s token window."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def __getattr__(self, name: str) -> Any:
        # Provider-specific extras (benchmarks read the local model's compute mode).
        return getattr(self.inner, name)

    def _pieces(self, texts: Sequence[str]) -> list[list[tuple[str, int]]]:
        inner = self.inner
        if not isinstance(inner, TokenWindow):
            return [[(t, 1)] for t in texts]
        return [windows(t, inner.token_spans(t), inner.max_tokens) for t in texts]

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        pieces = self._pieces(texts)
        if all(len(p) == 1 for p in pieces):
            return await self.inner.embed_documents(texts)
        flat = [text for p in pieces for text, _ in p]
        vectors = await self.inner.embed_documents(flat)
        out: list[Vector] = []
        at = 0
        for p in pieces:
            got = vectors[at : at + len(p)]
            at += len(p)
            out.append(got[0] if len(p) == 1 else pool(got, [n for _, n in p]))
        return out

    async def embed_query(self, text: str) -> Vector:
        [pieces] = self._pieces([text])
        if len(pieces) == 1:
            return await self.inner.embed_query(text)
        return (await self.embed_documents([text]))[0]

    async def aclose(self) -> None:
        await self.inner.aclose()


def whole(provider: Embedder) -> Embedder:
    """``provider`` wrapped when it declares a token window; as it is otherwise."""
    if isinstance(provider, WholeTextEmbedder) or not isinstance(provider, TokenWindow):
        return provider
    return WholeTextEmbedder(provider)

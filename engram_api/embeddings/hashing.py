"""Deterministic feature-hashing embedder: numpy only, the test embedder and an explicit choice.

Lexical only (paraphrases do not match), but stable across processes and machines.
"""

from __future__ import annotations

import itertools
import math
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Final

import numpy as np

from engram_api.embeddings.base import Vector

_WORD_RE: Final = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOPWORDS: Final = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been
    being am do does did have has had having i me my we our you your he him his she her it its they
    them their this that these those what which who whom whose when where why how not no nor so too
    very can will just should would could may might must shall about into over under again further
    once here there all any both each few more most other some such only own same
    than s t""".split()  # noqa: SIM905
)


class HashingEmbedder:
    def __init__(self, dimension: int = 384) -> None:
        if dimension < 8:
            raise ValueError("hash embedder dimension must be at least 8")
        self._dim = dimension

    @property
    def model_id(self) -> str:
        return f"hash/{self._dim}"

    @property
    def dimension(self) -> int:
        return self._dim

    def embed_one(self, text: str) -> Vector:
        words = [w for w in _WORD_RE.findall(text.lower()) if w not in _STOPWORDS]
        feats: Counter[str] = Counter()
        weights: dict[str, float] = {}
        for w in words:
            feats["w:" + w] += 1
            weights["w:" + w] = 1.0
            marked = f"<{w}>"
            for i in range(len(marked) - 2):
                key = "c:" + marked[i : i + 3]
                feats[key] += 1
                weights[key] = 0.35
        for a, b in itertools.pairwise(words):
            key = f"b:{a} {b}"
            feats[key] += 1
            weights[key] = 0.7
        vec = np.zeros(self._dim, dtype=np.float32)
        for key, count in feats.items():
            h = zlib.crc32(key.encode("utf-8"))
            sign = -1.0 if h & 0x80000000 else 1.0
            vec[h % self._dim] += sign * weights[key] * (1.0 + math.log(count))
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            # Text with no features (e.g. only stopwords) still needs a valid unit vector.
            vec[zlib.crc32(text.encode("utf-8")) % self._dim] = 1.0
            return vec
        return vec / norm

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return [self.embed_one(t) for t in texts]

    async def embed_query(self, text: str) -> Vector:
        return self.embed_one(text)

    async def aclose(self) -> None:
        return None

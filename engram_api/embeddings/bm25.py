"""Lexical sparse vectors (BM25 term weights) stored beside the dense vector.

qdrant-edge ships the tokenizer, English stemmer and stopwords in-process, so no model is
downloaded; the IDF half of BM25 is applied by the store (``Modifier.Idf``), which is why the
same encoder serves both qdrant-edge and a Qdrant server.
"""

from __future__ import annotations

import qdrant_edge as qe

from engram_api.store.base import SparseVec


class Bm25Encoder:
    def __init__(self, language: str = "english") -> None:
        self._bm25 = qe.Bm25(qe.Bm25Config(language=language))

    def document(self, text: str) -> SparseVec:
        sv = self._bm25.embed_document(text)
        return SparseVec(indices=list(sv.indices), values=list(sv.values))

    def query(self, text: str) -> SparseVec:
        sv = self._bm25.embed_query(text)
        return SparseVec(indices=list(sv.indices), values=list(sv.values))

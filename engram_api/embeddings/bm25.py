"""Lexical sparse vectors (BM25 term weights) stored beside the dense vector.

qdrant-edge ships the tokenizer, English stemmer and stopwords in-process, so no model is
downloaded; the IDF half of BM25 is applied by the store (``Modifier.Idf``), which is why the
same encoder serves both qdrant-edge and a Qdrant server.

Chinese, Japanese and Korean are written without spaces between words, so the word tokenizer
made one token of a whole sentence ("用户喜欢简洁回复" never matched "回复"): BM25 found 0 of 20
Chinese paraphrases. Before tokenizing, each run of CJK characters is rewritten as its
overlapping character bigrams ("用户 户喜 喜欢 ..."), plus the lone character of a one-character
run; CJK punctuation becomes a space. Latin text around it is left byte for byte as it was, so
English (and the English words in a mixed sentence) get exactly the vectors they had before.
Why not qdrant-edge's own ``Multilingual`` tokenizer (a dictionary segmenter): it drops every
number ("端口是 8080" loses 8080) and changes 274 of 9,735 LoCoMo English texts. Why not
jieba: on the bilingual corpus bigrams did as well or better (see docs/benchmarks.md), with no
20 MB dictionary to load.

A change to this tokenisation changes the sparse vectors of stored memories: it is versioned
(:data:`TOKENIZER`, recorded in each memory's payload as ``sparse_tokenizer``) and
``engram reembed`` rebuilds them.
"""

from __future__ import annotations

import re
from typing import Final

import qdrant_edge as qe

from engram_api.store.base import SparseVec
from engram_api.text.zh import SEGMENT_STOPWORDS

# v1: qdrant-edge's English word tokenizer as is. v2: CJK runs as character bigrams first.
TOKENIZER: Final = "bm25-en-cjk2"
_CJK: Final = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs (ext. A, unified, compatibility)
    "\uac00-\ud7af"  # hangul syllables
)
_CJK_RUN: Final = re.compile(f"[{_CJK}]+")
# CJK and full-width punctuation: the word tokenizer only knows ASCII punctuation.
_CJK_PUNCT: Final = re.compile(
    "[\u3000-\u303f\uff00-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]"
)


_STOP: Final = re.compile("|".join(map(re.escape, SEGMENT_STOPWORDS)))


def _bigrams(match: re.Match[str]) -> str:
    tokens: list[str] = []
    for piece in _STOP.split(match.group(0)):
        if len(piece) == 1:
            tokens.append(piece)
        tokens += [piece[i : i + 2] for i in range(len(piece) - 1)]
    return " " + " ".join(tokens) + " "


def segment(text: str) -> str:
    """``text`` with CJK runs as space-separated bigrams; unchanged when it has no CJK."""
    if not _CJK_RUN.search(text) and not _CJK_PUNCT.search(text):
        return text
    return _CJK_RUN.sub(_bigrams, _CJK_PUNCT.sub(" ", text))


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


class Bm25Encoder:
    def __init__(self, language: str = "english", *, cjk: bool = True) -> None:
        """``cjk=False`` is the v1 tokenisation, kept for benchmarks against it."""
        self._bm25 = qe.Bm25(qe.Bm25Config(language=language))
        self._segment = segment if cjk else str

    def document(self, text: str) -> SparseVec:
        sv = self._bm25.embed_document(self._segment(text))
        return SparseVec(indices=list(sv.indices), values=list(sv.values))

    def query(self, text: str) -> SparseVec:
        sv = self._bm25.embed_query(self._segment(text))
        return SparseVec(indices=list(sv.indices), values=list(sv.values))

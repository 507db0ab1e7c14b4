# ruff: noqa: RUF001  (Chinese text uses full-width punctuation)
"""BM25 sparse vectors: Chinese tokenised as character bigrams, English exactly as before."""

from __future__ import annotations

import pytest
import qdrant_edge as qe

from engram_api.embeddings.bm25 import Bm25Encoder, segment


def overlap(doc: str, query: str) -> set[int]:
    bm25 = Bm25Encoder()
    return set(bm25.document(doc).indices) & set(bm25.query(query).indices)


def test_a_chinese_sentence_becomes_many_terms_not_one() -> None:
    vec = Bm25Encoder().document("用户喜欢简洁回复，不要列表，一定要带代码示例")
    assert len(vec.indices) > 10


def test_a_chinese_keyword_matches_inside_a_sentence_without_spaces() -> None:
    assert overlap("用户喜欢简洁回复，不要列表，一定要带代码示例", "代码示例")
    assert not overlap("用户喜欢简洁回复，不要列表，一定要带代码示例", "数据库迁移")


def test_question_words_do_not_match_every_memory() -> None:
    # 什么 / 哪个 / 怎么 carry no topic; a memory containing them must not match on them alone.
    assert not overlap("什么时候都可以", "用户喜欢什么颜色")
    assert "什么" not in segment("他想要什么样的回答风格")


@pytest.mark.parametrize(
    "text",
    [
        "The user prefers short answers with code examples",
        "Deploy with helm upgrade --install after running the tests (port 8080, v1.31).",
        "Caroline has known her friends for 4 years.",
    ],
)
def test_english_text_gets_exactly_the_vectors_of_the_previous_tokenisation(text: str) -> None:
    raw = qe.Bm25(qe.Bm25Config(language="english"))
    ours = Bm25Encoder()
    assert segment(text) == text
    for mine, theirs in ((ours.document(text), raw.embed_document(text)),
                         (ours.query(text), raw.embed_query(text))):  # fmt: skip
        assert (mine.indices, mine.values) == (list(theirs.indices), list(theirs.values))


def test_mixed_text_keeps_its_english_words_and_numbers_matchable() -> None:
    assert overlap("部署服务的端口是 8080", "port 8080")
    assert overlap("前端组统一用 pnpm，不要用 npm 安装依赖", "pnpm")
    assert overlap("前端组统一用 pnpm，不要用 npm 安装依赖", "前端用什么包管理器")


def test_japanese_and_korean_runs_are_split_too() -> None:
    assert overlap("東京の会議室を予約しました", "会議室")
    assert overlap("회의실을 예약했습니다", "회의실")


def test_the_v1_tokenisation_is_kept_for_benchmarks() -> None:
    old = Bm25Encoder(cjk=False)
    assert len(old.document("用户喜欢简洁回复").indices) == 1

# ruff: noqa: RUF001  (Chinese text uses full-width punctuation)
"""Chinese word lists for dedup and conflict rules: numbers, negation, antonyms."""

from __future__ import annotations

import pytest

from engram_api.text.zh import antonyms, negated, numbers, zh_number


@pytest.mark.parametrize(
    ("text", "value"), [("三", 3), ("十五", 15), ("三百二十", 320), ("两万三千", 23000), ("八", 8)]
)
def test_chinese_numerals_read_as_numbers(text: str, value: int) -> None:
    assert zh_number(text) == value


def test_numbers_are_found_in_arabic_and_chinese_but_not_the_article_yi() -> None:
    assert numbers("端口是 8080，三个副本，一个节点") == [8080.0, 3.0]
    assert numbers("端口是 9090") != numbers("端口是 8080")


@pytest.mark.parametrize("text", ["端口不是 8080", "从不在周五发布", "别用 npm", "没有备份"])
def test_negations_are_seen(text: str) -> None:
    assert negated(text)


@pytest.mark.parametrize("text", ["效果不错", "非常简洁", "无论如何都要测试", "别人的代码"])
def test_words_that_only_contain_a_negation_character_are_not_negations(text: str) -> None:
    assert not negated(text)


def test_antonym_pairs_are_found_across_two_statements() -> None:
    assert antonyms("缓存已开启", "缓存已关闭") == ("开启", "关闭")
    assert antonyms("缓存已开启", "缓存已开启") is None

"""Chinese word lists for the text paths that read meaning from words.

BM25 (:mod:`engram_api.embeddings.bm25`) drops :data:`STOPWORDS` the way qdrant-edge drops
English stopwords. Dedup and conflict rules (engram_api.maintenance) can use the negation,
antonym and number lists: two memories that differ by a negation (端口是 8080 / 端口不是 8080),
an antonym pair (开启/关闭) or a number (8080 / 9090) are not duplicates. Chinese has no spaces,
so the lists are matched as substrings; :func:`negated` and :func:`numbers` do that carefully.
"""

from __future__ import annotations

import re
from typing import Final

# Negation words and prefixes, longest first so 从不 is taken before 不.
NEGATIONS: Final = (
    "从来没有", "从来不", "并没有", "并不", "从没", "从未", "从不", "没有", "不要", "不用",
    "不能", "不会", "不是", "别再", "不必", "无需", "无须", "未曾", "不", "没", "别", "未",
    "无", "非", "勿", "莫",
)  # fmt: skip
# Words containing a negation character that do not negate (不错 = good, 无论 = whatever).
NOT_NEGATIONS: Final = frozenset(
    {"不错", "不过", "不断", "不久", "不同", "无论", "非常", "别人", "别的", "未来", "无线"}
)
# Pairs whose members contradict each other when the rest of two statements agree.
ANTONYM_PAIRS: Final = (
    ("开启", "关闭"), ("打开", "关闭"), ("启用", "禁用"), ("允许", "禁止"), ("喜欢", "讨厌"),
    ("喜欢", "不喜欢"), ("增加", "减少"), ("上升", "下降"), ("成功", "失败"), ("同意", "反对"),
    ("支持", "不支持"), ("必须", "禁止"), ("总是", "从不"), ("最大", "最小"), ("最多", "最少"),
    ("提前", "推迟"), ("升级", "降级"), ("公开", "私有"), ("在线", "离线"), ("有效", "无效"),
    ("正确", "错误"), ("上午", "下午"), ("白天", "晚上"), ("同步", "异步"), ("加密", "明文"),
)  # fmt: skip
# Chinese numerals, so 三个副本 and 3 个副本 compare equal and 三 / 五 differ.
NUMERALS: Final = {
    "零": 0, "\u3007": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
    "八": 8, "九": 9, "十": 10, "百": 100, "千": 1000, "万": 10_000, "亿": 100_000_000,
}  # fmt: skip
# Function and question words: they carry no topic, and in a query (什么, 哪个, 怎么) they
# would match any memory that happens to contain them.
STOPWORDS: Final = frozenset(
    {
        "的", "了", "着", "过", "吗", "呢", "吧", "啊", "呀", "嘛", "是", "在", "和", "与",
        "及", "或", "也", "都", "就", "还", "又", "把", "被", "给", "让", "对", "从", "向",
        "于", "以", "之", "而", "并", "很", "太", "更", "最", "这", "那", "这个", "那个",
        "这些", "那些", "什么", "怎么", "怎样", "怎么样", "如何", "为什么", "为何", "哪",
        "哪个", "哪些", "哪里", "哪儿", "哪种", "多少", "几", "谁", "是否", "有没有", "是不是",
        "能不能", "要不要", "一下", "一个", "一些", "我", "你", "他", "她", "它", "我们",
        "你们", "他们", "她们", "应该", "可以", "需要", "现在", "时候", "之前", "之后", "以后",
        "以前", "有", "要", "会", "能", "得", "地", "个",
    }
)  # fmt: skip
# What lexical search may cut out of a run of characters. Single characters that are also parts
# of words (会 in 会议, 能 in 能力) stay; only particles that almost never are (的 aside: 目的).
SEGMENT_STOPWORDS: Final = (
    *sorted((w for w in STOPWORDS if len(w) > 1), key=len, reverse=True),
    *("的", "了", "吗", "呢", "吧", "啊", "呀", "嘛"),
)
_DIGITS: Final = re.compile(r"\d+(?:\.\d+)?")
_ZH_NUMBER: Final = re.compile("[零\u3007一二两三四五六七八九十百千万亿]+")


def zh_number(text: str) -> int | None:
    """The value of a Chinese numeral string (三百二十 -> 320), None if it is not one."""
    if not text or any(c not in NUMERALS for c in text):
        return None
    total, section, digit = 0, 0, 0
    for c in text:
        v = NUMERALS[c]
        if v < 10:
            digit = v
        elif v < 10_000:
            section += (digit or 1) * v
            digit = 0
        else:
            total += (section + digit) * v
            section = digit = 0
    return total + section + digit


def numbers(text: str) -> list[float]:
    """Every number in ``text``, Arabic or Chinese numerals, in order of appearance."""
    found: list[tuple[int, float]] = [(m.start(), float(m.group())) for m in _DIGITS.finditer(text)]
    for m in _ZH_NUMBER.finditer(text):
        value = zh_number(m.group())
        # A lone 一 is mostly an article (一个, 一直), not a count.
        if value is not None and m.group() != "一":
            found.append((m.start(), float(value)))
    return [v for _, v in sorted(found)]


def negated(text: str) -> bool:
    """Whether ``text`` holds a negation word (not counting 不错, 非常 and the like)."""
    masked = text
    for word in NOT_NEGATIONS:
        masked = masked.replace(word, " ")
    return any(neg in masked for neg in NEGATIONS)


def antonyms(a: str, b: str) -> tuple[str, str] | None:
    """The first antonym pair with one member in ``a`` and the other in ``b`` (not in both)."""
    for x, y in ANTONYM_PAIRS:
        for p, q in ((x, y), (y, x)):
            if p in a and q in b and q not in a and p not in b:
                return p, q
    return None

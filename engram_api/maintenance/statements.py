# ruff: noqa: RUF001  (Chinese punctuation is what these patterns match)
"""What makes two close statements different: numbers, versions, dates, negation, antonyms,
named entities — in English and Chinese.

An embedding puts "The staging DB is Postgres 15" and "... Postgres 16" at cosine 0.989 with
the default model, "Use pnpm, not npm" and its reverse at 0.992: closeness alone cannot say
"same memory". :func:`compare` reads both texts and says whether they agree on these points
(``None``) or how they differ (a :class:`Difference`). A difference is *clear* when the two
texts are otherwise the same statement (most of their words shared), so a policy may resolve
it without an LLM; otherwise it is only a reason not to merge.

Everything here is deterministic string work (regular expressions and small word lists), so
it costs microseconds per pair and runs only on pairs the vector search already found close.
The word lists are ours; engram_api/text may later hold shared lists for Chinese.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Final

# ------------------------------------------------------------------ word lists
_NUMBER_WORDS: Final = {
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "fifteen": "15",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "hundred": "100",
    "once": "1",
    "twice": "2",
    "single": "1",
    "double": "2",
}
_ZH_DIGITS: Final = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
# Chinese numerals that are part of common words, not quantities.
_ZH_NUMERAL_WORDS: Final = ("一起", "一下", "一般", "一直", "一定", "统一", "一些", "唯一", "万一")

_EN_NEGATIONS: Final = frozenset(
    {
        "not",
        "no",
        "never",
        "nothing",
        "none",
        "nobody",
        "neither",
        "nor",
        "without",
        "unless",
        "cannot",
        "dont",
        "doesnt",
        "didnt",
        "isnt",
        "arent",
        "wasnt",
        "werent",
        "wont",
        "cant",
        "couldnt",
        "shouldnt",
        "mustnt",
        "neednt",
        "havent",
        "hasnt",
    }
)
# Longest first: 从不 is one negation, not 从 + 不.
_ZH_NEGATIONS: Final = (
    "从来不",
    "从不",
    "从未",
    "没有",
    "不要",
    "不用",
    "不能",
    "不会",
    "不是",
    "别",
    "没",
    "不",
    "未",
    "勿",
    "禁止",
    "无需",
    "无法",
)
# Words holding a negation character that negate nothing.
_ZH_NOT_NEGATION: Final = (
    "不过",
    "不同",
    "不断",
    "不错",
    "不久",
    "不仅",
    "不少",
    "差不多",
    "不但",
    "并不是说",
    "未来",
    "毫不犹豫",
    "不管",
)

# Each tuple is one axis; its members are mutually exclusive values on it.
_EN_ANTONYMS: Final[tuple[tuple[frozenset[str], ...], ...]] = tuple(
    tuple(frozenset(side.split("|")) for side in axis.split(" / "))
    for axis in (
        "dark / light",
        "enable|enabled|enables|enabling|on / disable|disabled|disables|disabling|off",
        "allow|allowed|allows|permit|permitted / deny|denied|forbid|forbidden|prohibited",
        "accept|accepted / reject|rejected",
        "increase|increased|raise|more|higher / decrease|decreased|reduce|lower|less|fewer",
        "before / after",
        "tab|tabs / space|spaces",
        "start|starts|started / stop|stops|stopped",
        "include|included|includes / exclude|excluded|excludes",
        "public / private",
        "sync|synchronous / async|asynchronous",
        "short|shorter|brief|small|smaller / long|longer|large|larger|detailed",
        "minimum|min / maximum|max",
        "first / last",
        "success|succeeded|passed / failure|failed",
        "true / false",
        "metric / imperial",
        "ascending / descending",
        "online / offline",
        "required|mandatory|must / optional",
        "always / never|sometimes",
        "early|earlier / late|later",
        "encrypted / unencrypted|plaintext",
        "horizontal / vertical",
        "path|url / header|headers",
        "morning|mornings / afternoon|afternoons|evening|evenings",
        "am / pm",
        "upper|uppercase / lower|lowercase",
    )
)
_ZH_ANTONYMS: Final[tuple[tuple[tuple[str, ...], ...], ...]] = tuple(
    tuple(tuple(side.split("|")) for side in axis.split(" / "))
    for axis in (
        "深色|暗色|黑色 / 浅色|亮色|白色",
        "开启|启用|打开|开着 / 关闭|禁用|关掉|关着",
        "允许 / 禁止",
        "同步 / 异步",
        "公开 / 私有",
        "升序 / 降序",
        "增加|增大|提高 / 减少|减小|降低",
        "之前|以前 / 之后|以后",
        "总是|每次|一直 / 从不|从来不",
        "必须|要求 / 可选",
        "成功 / 失败",
        "简短|简洁|简单 / 详细|详尽",
        "最大 / 最小",
        "制表符 / 空格",
        "路径 / 请求头",
        "上午|凌晨 / 下午|晚上",
        "英文|英语 / 中文|汉语",
    )
)
_MONTHS: Final = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_WEEKDAYS: Final = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_ZH_WEEKDAYS: Final = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "日": 7, "天": 7}
_UNITS: Final = {
    "second": "s",
    "seconds": "s",
    "minute": "min",
    "minutes": "min",
    "hour": "h",
    "hours": "h",
    "hourly": "h",
    "day": "d",
    "days": "d",
    "daily": "d",
    "nightly": "d",
    "night": "d",
    "week": "w",
    "weeks": "w",
    "weekly": "w",
    "month": "mo",
    "months": "mo",
    "monthly": "mo",
    "quarter": "q",
    "quarterly": "q",
    "year": "y",
    "years": "y",
    "yearly": "y",
    "kb": "kb",
    "mb": "mb",
    "gb": "gb",
    "tb": "tb",
    "秒": "s",
    "分钟": "min",
    "小时": "h",
    "天": "d",
    "周": "w",
    "月": "mo",
    "季度": "q",
    "年": "y",
}
# Lower-case names that are entities although written in lower case.
_LOWER_ENTITIES: Final = frozenset(
    [
        "npm",
        "pnpm",
        "yarn",
        "bun",
        "pip",
        "poetry",
        "uv",
        "conda",
        "docker",
        "podman",
        "kubectl",
        "helm",
        "terraform",
        "ansible",
        "git",
        "postgres",
        "postgresql",
        "mysql",
        "mariadb",
        "sqlite",
        "redis",
        "kafka",
        "rabbitmq",
        "nats",
        "mongodb",
        "elasticsearch",
        "react",
        "vue",
        "angular",
        "svelte",
        "python",
        "go",
        "rust",
        "java",
        "kotlin",
        "typescript",
        "javascript",
        "node",
        "nginx",
        "apache",
        "caddy",
        "envoy",
        "grafana",
        "loki",
        "prometheus",
        "vite",
        "webpack",
    ]
)
_ALIASES: Final = {
    "postgresql": "postgres",
    "pg": "postgres",
    "k8s": "kubernetes",
    "js": "javascript",
    "ts": "typescript",
    "nodejs": "node",
    "node.js": "node",
    "golang": "go",
}
# Sentence-initial capitalised words that are not names.
_COMMON: Final = frozenset(
    [
        "the",
        "a",
        "an",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "we",
        "our",
        "you",
        "your",
        "they",
        "their",
        "he",
        "she",
        "his",
        "her",
        "i",
        "my",
        "user",
        "users",
        "use",
        "using",
        "run",
        "runs",
        "always",
        "never",
        "do",
        "don't",
        "not",
        "no",
        "all",
        "every",
        "each",
        "some",
        "any",
        "one",
        "two",
        "three",
        "when",
        "while",
        "after",
        "before",
        "if",
        "in",
        "on",
        "at",
        "for",
        "from",
        "to",
        "by",
        "with",
        "of",
        "and",
        "or",
        "but",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "should",
        "must",
        "may",
        "can",
        "could",
        "will",
        "would",
        "please",
        "only",
        "also",
        "then",
        "there",
        "here",
        "what",
        "which",
        "who",
        "how",
        "why",
        "where",
        "decision",
        "lesson",
        "note",
        "deploys",
        "deploy",
        "production",
        "staging",
        "backups",
        "logs",
        "log",
        "search",
        "api",
        "cached",
        "ci",
        "pull",
        "sprints",
        "sprint",
        "services",
        "service",
        "admin",
        "answers",
        "answer",
        "show",
        "increase",
        "decrease",
        "enable",
        "disable",
        "pin",
        "rotate",
        "clear",
        "restart",
        "commits",
        "commit",
        "feature",
        "public",
        "private",
        "synchronous",
        "asynchronous",
        "uploads",
        "upload",
        "infrastructure",
        "failed",
        "cached",
        "for",
        "port",
    ]
)
_NAME_DASH_NUMBER: Final = re.compile(r"([A-Za-z]{2,})-(\d)")
_CJK: Final = re.compile(r"[\u3400-\u9fff]")
_WORD: Final = re.compile(r"[A-Za-z][A-Za-z0-9+#._/'-]*[A-Za-z0-9+#]|[A-Za-z]")
_NUM: Final = re.compile(r"(?<![A-Za-z0-9])v?(\d+(?:[.:,]\d+)*)(?:st|nd|rd|th)?")
_CONTRAST_NOT: Final = re.compile(r",\s*not\s+(?!only\b)", re.IGNORECASE)
_ZH_NUM: Final = re.compile(r"[零一二两三四五六七八九十百千]+")
_ZH_WEEKDAY_RE: Final = re.compile(r"(?:周|星期|礼拜)([一二三四五六日天])")
_CONTRAST_EN: Final = re.compile(
    r"\b([\w.+#-]+)\s*(?:,\s*)?(?:not|instead of|rather than|over|than)\s+(?:the\s+)?([\w.+#-]+)",
    re.IGNORECASE,
)
_CONTRAST_ZH: Final = re.compile(
    r"([A-Za-z0-9.+#-]+|[\u3400-\u9fff]{1,4})\s*[，,]?\s*(?:而不是|不用|不是|而非)\s*([A-Za-z0-9.+#-]+|[\u3400-\u9fff]{1,4})"
)
_STOP: Final = frozenset(
    [
        "the",
        "a",
        "an",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "by",
        "with",
        "and",
        "or",
        "as",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "should",
        "must",
        "will",
        "would",
        "can",
        "could",
        "may",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "than",
        "then",
        "so",
        "all",
        "every",
        "each",
    ]
)


# ------------------------------------------------------------------- features
def _stem(word: str) -> str:
    w = word.lower().strip("'.-_/")
    w = w.removesuffix("'s")
    w = _ALIASES.get(w, w)
    for suffix in ("ies", "es", "s"):
        if len(w) > 4 and w.endswith(suffix) and not w.endswith("ss"):
            w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return w


def _zh_number(s: str) -> int | None:
    """一 → 1, 十五 → 15, 二十 → 20, 三百 → 300 (up to thousands)."""
    if s == "十":
        return 10
    total, current = 0, 0
    for ch in s:
        if ch in _ZH_DIGITS:
            current = _ZH_DIGITS[ch]
        elif ch in "十百千":
            unit = {"十": 10, "百": 100, "千": 1000}[ch]
            total += (current or 1) * unit
            current = 0
        else:
            return None
    return total + current


def _norm_number(s: str) -> str:
    parts = re.split(r"([.:,])", s)
    out = []
    for p in parts:
        out.append(p if p in ".:," else str(int(p)) if p.isdigit() else p)
    joined = "".join(out)
    # 1,000 is a thousand, 2.0 is version 2.0 (kept), 02:00 is 2:0.
    return joined.replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+", s) else joined


@dataclass(frozen=True)
class Features:
    numbers: frozenset[str]
    negations: int
    # axis index -> sides present (0 or 1), English axes then Chinese (offset).
    antonyms: dict[int, frozenset[int]]
    months: frozenset[str]
    weekdays: frozenset[str]
    units: frozenset[str]
    entities: frozenset[str]
    # Entities in order of first appearance (who did what to whom).
    order: tuple[str, ...]
    # (preferred, rejected) from "X, not Y" / "X over Y" / "X 而不是 Y".
    contrasts: frozenset[tuple[str, str]]
    words: frozenset[str]
    # Word (or CJK character bigram) tokens, for lexical overlap.
    tokens: frozenset[str]
    length: int


def _zh_strip_non_negations(text: str) -> str:
    for w in _ZH_NOT_NEGATION:
        text = text.replace(w, "  ")
    return text


def _count_zh_negations(text: str) -> int:
    text = _zh_strip_non_negations(text)
    n = 0
    for cue in _ZH_NEGATIONS:
        n += text.count(cue)
        text = text.replace(cue, " ")
    return n


def _cjk_tokens(text: str) -> set[str]:
    out: set[str] = set()
    for run in re.findall(r"[\u3400-\u9fff]+", text):
        if len(run) == 1:
            out.add(run)
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return out


@lru_cache(maxsize=65_536)
def features(text: str) -> Features:
    has_cjk = bool(_CJK.search(text))
    # "Apache-2.0" is the name Apache and the version 2.0.
    text = _NAME_DASH_NUMBER.sub(r"\1 \2", text)
    raw_words = _WORD.findall(text)
    lower = [w.lower().replace("'", "").replace("’", "") for w in raw_words]
    words = frozenset(_stem(w) for w in lower)

    numbers = {_norm_number(m.group(1)) for m in _NUM.finditer(text)}
    numbers.update(_NUMBER_WORDS[w] for w in lower if w in _NUMBER_WORDS)
    if has_cjk:
        zh = text
        for w in _ZH_NUMERAL_WORDS:
            zh = zh.replace(w, " ")
        zh = _ZH_WEEKDAY_RE.sub(" ", zh)
        for m in _ZH_NUM.finditer(zh):
            value = _zh_number(m.group(0))
            if value is not None:
                numbers.add(str(value))

    negations = sum(
        1
        for w in lower
        if w in _EN_NEGATIONS
        or (
            w.endswith("nt")
            and w[:-2]
            in {
                "do",
                "does",
                "did",
                "is",
                "are",
                "was",
                "were",
                "wo",
                "ca",
                "could",
                "should",
                "must",
                "need",
                "have",
                "has",
            }
        )
    )
    # "X, not Y" names a rejected alternative (compared as a contrast below), like
    # "X instead of Y": it negates nothing in the statement.
    negations -= len(_CONTRAST_NOT.findall(text))
    if has_cjk:
        negations += _count_zh_negations(text)

    antonyms: dict[int, frozenset[int]] = {}
    lower_set = set(lower)
    for i, axis in enumerate(_EN_ANTONYMS):
        sides = frozenset(s for s, members in enumerate(axis) if members & lower_set)
        if sides:
            antonyms[i] = sides
    if has_cjk:
        for j, zaxis in enumerate(_ZH_ANTONYMS):
            sides = frozenset(
                s for s, members in enumerate(zaxis) if any(m in text for m in members)
            )
            if sides:
                antonyms[len(_EN_ANTONYMS) + j] = sides

    months = frozenset(w for w in lower if w in _MONTHS)
    weekdays = {w.removesuffix("s") for w in lower if w.removesuffix("s") in _WEEKDAYS}
    weekdays.update(str(_ZH_WEEKDAYS[d]) for d in _ZH_WEEKDAY_RE.findall(text))
    units = {_UNITS[w] for w in lower if w in _UNITS}
    if has_cjk:
        units.update(u for k, u in _UNITS.items() if _CJK.match(k) and k in text)

    entities: dict[str, None] = {}
    for n, (w, lw) in enumerate(zip(raw_words, lower, strict=True)):
        stem = _stem(lw)
        sentence_start = n == 0 or bool(
            re.search(r"[.!?:;。！？]\s*$", text[: text.find(w)] if w in text else "")
        )
        if (
            lw in _LOWER_ENTITIES
            or stem in _LOWER_ENTITIES
            or any(c.isdigit() for c in w)
            or "/" in w
            or "-" in w.strip("-")
            or (w[0].isupper() and (not sentence_start or lw not in _COMMON) and lw not in _COMMON)
            or (w.isupper() and len(w) > 1)
        ):
            entities[stem] = None
    contrasts: set[tuple[str, str]] = set()
    for m in _CONTRAST_EN.finditer(text):
        contrasts.add((_stem(m.group(1)), _stem(m.group(2))))
    for m in _CONTRAST_ZH.finditer(text):
        contrasts.add((m.group(1).lower(), m.group(2).lower()))

    tokens = {w for w in words if w not in _STOP}
    tokens.update(_cjk_tokens(text))
    return Features(
        numbers=frozenset(numbers),
        negations=negations,
        antonyms=antonyms,
        months=months,
        weekdays=frozenset(weekdays),
        units=frozenset(units),
        entities=frozenset(entities),
        order=tuple(entities),
        contrasts=frozenset(contrasts),
        words=words,
        tokens=frozenset(tokens),
        length=len(text),
    )


# -------------------------------------------------------------------- compare
@dataclass(frozen=True)
class Difference:
    # number | date | negation | antonym | entity | order | content
    kind: str
    detail: str
    # Otherwise the same statement: a type policy may resolve it without an LLM.
    clear: bool


def overlap(a: str, b: str) -> float:
    """Dice overlap of content tokens (words, CJK character bigrams): 1.0 = same words."""
    fa, fb = features(a).tokens, features(b).tokens
    if not fa and not fb:
        return 1.0
    return 2 * len(fa & fb) / (len(fa) + len(fb))


def _residue(fa: Features, fb: Features, drop: set[str]) -> float:
    ta, tb = fa.tokens - drop, fb.tokens - drop
    if not ta and not tb:
        return 1.0
    return 2 * len(ta & tb) / (len(ta) + len(tb))


# A pair whose tokens (the differing ones left out) overlap this much is one statement with
# one value changed; measured on tests/corpora/lifecycle.yaml (docs/maintenance.md).
CLEAR_RESIDUE: Final = 0.5
# Beyond this many characters two texts are only the same memory if they share nearly all
# their words: the vector of a long text is dominated by what it shares with the other.
LONG_TEXT: Final = 600
LONG_OVERLAP: Final = 0.9


def compare(a: str, b: str) -> Difference | None:
    """How ``a`` and ``b`` differ on what makes statements differ, or None if they agree."""
    fa, fb = features(a), features(b)
    if max(fa.length, fb.length) > LONG_TEXT and overlap(a, b) < LONG_OVERLAP:
        # Long texts with different content are different memories, whatever their vectors
        # (dominated by a shared opening) say; not one statement with one value changed.
        return Difference("content", "long texts with different content", clear=False)
    found: list[tuple[str, str, set[str]]] = []
    if fa.numbers and fb.numbers and fa.numbers != fb.numbers:
        diff = fa.numbers ^ fb.numbers
        found.append(("number", f"{sorted(fa.numbers)} vs {sorted(fb.numbers)}", set(diff)))
    for name, xa, xb in (("date", fa.months, fb.months), ("date", fa.weekdays, fb.weekdays)):
        if xa and xb and xa != xb:
            found.append((name, f"{sorted(xa)} vs {sorted(xb)}", {_stem(x) for x in xa ^ xb}))
    if fa.units and fb.units and not fa.units & fb.units:
        found.append(("number", f"unit {sorted(fa.units)} vs {sorted(fb.units)}", set()))
    if fa.negations % 2 != fb.negations % 2:
        found.append(("negation", f"{fa.negations} vs {fb.negations} negations", set()))
    for axis in fa.antonyms.keys() & fb.antonyms.keys():
        sa, sb = fa.antonyms[axis], fb.antonyms[axis]
        if len(sa) == 1 and len(sb) == 1 and sa != sb:
            found.append(("antonym", _axis_name(axis), _axis_words(axis)))
    ca = {c for c in fa.contrasts if c[0] != c[1]}
    cb = {c for c in fb.contrasts if c[0] != c[1]}
    swapped = any((y, x) in cb for x, y in ca)
    if swapped:
        found.append(("order", "preferred and rejected swapped", set()))
    order_a = [e for e in fa.order if e in fb.entities]
    order_b = [e for e in fb.order if e in fa.entities]
    same_words = fa.tokens == fb.tokens
    reordered = _dedup_order(order_a) != _dedup_order(order_b)
    if not swapped and same_words and len(set(order_a)) >= 2 and reordered:
        # "Alice reports to Bob" / "Bob reports to Alice": the same words, other roles. Which
        # one is right cannot be told from the text, so it is never clear.
        return Difference("entity_order", f"{' / '.join(_dedup_order(order_a))} swapped", False)
    only_a = {e for e in fa.entities if e not in fb.words and e not in fb.entities}
    only_b = {e for e in fb.entities if e not in fa.words and e not in fa.entities}
    if only_a and only_b:
        found.append(("entity", f"{sorted(only_a)} vs {sorted(only_b)}", only_a | only_b))
    if not found:
        if _CJK.search(a) or _CJK.search(b):
            # Chinese names and values are unmarked in writing: one-for-one substitutions of
            # a word show as a high overlap with a changed bigram on each side.
            return _cjk_substitution(a, b)
        return None
    kind, detail, drop = found[0]
    drop_tokens = {t for t in fa.tokens ^ fb.tokens if any(d and d in t for d in drop)}
    clear = _residue(fa, fb, drop_tokens) >= CLEAR_RESIDUE
    return Difference(kind, detail, clear=clear)


# Common surnames and places: Chinese writing does not mark names, so a one-for-one
# substitution is an entity change only when a side looks like a name.
_ZH_SURNAMES: Final = frozenset("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾")
_ZH_PLACES: Final = frozenset(
    [
        "北京",
        "上海",
        "广州",
        "深圳",
        "杭州",
        "成都",
        "南京",
        "武汉",
        "西安",
        "重庆",
        "天津",
        "苏州",
        "香港",
        "台北",
        "新加坡",
        "东京",
        "法兰克福",
        "伦敦",
    ]
)


def _name_like(segment: str) -> bool:
    seg = segment.strip(" ，,。")
    if not seg:
        return False
    if not _CJK.search(seg):
        return True  # Latin or digits: a product, a person, a value
    if seg in _ZH_PLACES or any(seg.startswith(p) for p in _ZH_PLACES):
        return True
    return 2 <= len(seg) <= 3 and seg[0] in _ZH_SURNAMES


def _cjk_substitution(a: str, b: str) -> Difference | None:
    """One segment of ``a`` replaced by one of ``b``, both looking like names."""
    ops = [
        op for op in SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    ops = [
        op for op in ops if a[op[1] : op[2]].strip(" 。，,.") or b[op[3] : op[4]].strip(" 。，,.")
    ]
    if len(ops) != 1 or ops[0][0] != "replace":
        return None
    _, i1, i2, j1, j2 = ops[0]
    sa, sb = a[i1:i2], b[j1:j2]
    latin = not _CJK.search(sa) or not _CJK.search(sb)
    if (_name_like(sa) and _name_like(sb)) or (latin and max(len(sa), len(sb)) <= 12):
        return Difference("entity", f"{sa.strip()} vs {sb.strip()}", clear=True)
    return None


def _dedup_order(xs: list[str]) -> list[str]:
    return list(dict.fromkeys(xs))


def _axis_name(axis: int) -> str:
    if axis < len(_EN_ANTONYMS):
        return " vs ".join(sorted(s)[0] for s in _EN_ANTONYMS[axis])
    return " vs ".join(s[0] for s in _ZH_ANTONYMS[axis - len(_EN_ANTONYMS)])


def _axis_words(axis: int) -> set[str]:
    if axis < len(_EN_ANTONYMS):
        return {_stem(w) for side in _EN_ANTONYMS[axis] for w in side}
    return {w for side in _ZH_ANTONYMS[axis - len(_EN_ANTONYMS)] for w in side}

"""Key-assignment shapes: a credential named by its key, in code, env, JSON, YAML or prose.

A provider rule knows a format; these know a *place*: ``DB_PASSWORD=hunter22``,
``{"api_key": "zq8K…"}``, ``password: …``, "the admin password for prod: Tr0ub4dor&3",
"我的密码是 hunter22". The key alone proves nothing ("the password is wrong for the staging db",
"max token: 100000", "pwd = /home/user/project"), so every value is checked: placeholders,
references, paths, numbers, durations and ordinary words pass.

Linear time: a keyword search finds each candidate, and each is examined in a window of at
most ``_WINDOW`` characters after it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

_WINDOW: Final = 160

# Keyword families, found by the literal at their core (a C-speed ``str.find``), then checked
# around it with small anchored patterns. "password" values may be plain numbers (a PIN-like
# password); plain-number "token" and "key" values are counts and limits ("max token: 100000").
_CORES: Final = ("pass", "pwd", "token", "key", "secret", "credential")
_TAIL: Final = re.compile(
    r"(?i:(?P<password>pass(?:word|wd|phrase|code)?|pwd)|(?P<token>tokens?)|(?P<key>keys?)"
    r"|(?P<secret>secrets?)|(?P<credential>credentials?))(?![A-Za-z0-9])"
)
_PREFIX_WORDS: Final = (
    "api",
    "access",
    "account",
    "auth",
    "client",
    "private",
    "secret",
    "signing",
    "master",
    "app",
    "encryption",
    "license",
    "service",
    "webhook",
    "x-api",
    "bot",
    "bearer",
    "refresh",
    "session",
    "id",
    "jwt",
    "shared",
    "consumer",
    "endpoint",
)
_SEPS: Final = ("", " ", "_", "-")
# Longest first, so "secret_access_" wins over "access_"; str.endswith(tuple) is one C call.
_PREFIXES: Final = tuple(
    sorted(
        {w + sep for w in _PREFIX_WORDS for sep in _SEPS}
        | {"secret" + s1 + w + s2 for w in ("access", "api") for s1 in _SEPS for s2 in _SEPS},
        key=len,
        reverse=True,
    )
)
_KEY_PREFIX_WORDS: Final = frozenset(_PREFIX_WORDS) - {"bot", "bearer", "refresh", "session", "id"}
_ASCII_LOWER: Final = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}

# After a key: closing quote, separator, opening quote, value (code, env, JSON, YAML). Views are
# NFKC, so a full-width colon arrives here as ":".
_ASSIGN: Final = re.compile(
    r"""["'`]?[ \t]*(?::=|=>|==|=|:)[ \t]*(?P<q>["'`]?)(?P<v>[^\s"'`,;}\])]{1,128})"""
)
# After a keyword in prose: an optional "for/of/on <a few words>", then is/was/:/…
_PROSE: Final = re.compile(
    r"""(?i:[ \t]+(?:for|of|on|to|in)[ \t]+(?:the[ \t]+)?[\w.-]{1,40}"""
    r"""(?:[ \t]+[\w.-]{1,40}){0,2})?"""
    r"""[ \t]*(?i:(?:is|was|are)(?:[ \t]+(?:now|still|set[ \t]+to|changed[ \t]+to))?"""
    r"""|set[ \t]+to|changed[ \t]+to|:|=|->|是|为)[ \t]*(?P<q>["'`\u201c\u2018]?)"""
    r"""(?P<v>[^\s"'`\u201d\u2019]{1,128})"""
)
# "…with password X", "login password X": the keyword followed directly by the value.
_DIRECT: Final = re.compile(r"[ \t]+(?P<q>[\"'`]?)(?P<v>[^\s\"'`]{6,128})")

_ZH_KEYWORD: Final = re.compile(r"密码|口令|令牌|密钥|秘钥|私钥")
_ZH_ASSIGN: Final = re.compile(
    r"[ \t]*(?:是|为|:|=|改成|改为|设为|设置为)[ \t]*"
    r"(?P<q>[\"'`\u201c\u2018「]?)(?P<v>[!-~]{4,128})"
)

# Views are NFKC, so full-width punctuation has already become ASCII.
_TRAILING: Final = ".,;:!?)]}>'\"`。、"
_STOPWORDS: Final = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "it",
        "its",
        "is",
        "was",
        "are",
        "be",
        "been",
        "being",
        "not",
        "no",
        "yes",
        "none",
        "null",
        "nil",
        "undefined",
        "true",
        "false",
        "on",
        "off",
        "ok",
        "okay",
        "empty",
        "unset",
        "set",
        "required",
        "optional",
        "invalid",
        "valid",
        "expired",
        "wrong",
        "incorrect",
        "missing",
        "revoked",
        "rotated",
        "refreshed",
        "changed",
        "stored",
        "hidden",
        "masked",
        "redacted",
        "secret",
        "password",
        "passwords",
        "token",
        "tokens",
        "key",
        "keys",
        "credential",
        "credentials",
        "default",
        "example",
        "sample",
        "dummy",
        "test",
        "placeholder",
        "changeme",
        "change_me",
        "todo",
        "tbd",
        "fixme",
        "string",
        "str",
        "int",
        "bool",
        "bytes",
        "text",
        "secretstr",
        "env",
        "environ",
        "bearer",
        "basic",
        "opaque",
        "auto",
        "random",
        "generated",
        "see",
        "ask",
        "in",
        "at",
        "from",
        "by",
        "for",
        "to",
        "of",
        "with",
        "here",
        "there",
        "below",
        "above",
        "same",
        "different",
        "new",
        "old",
        "your",
        "my",
        "our",
        "their",
        "his",
        "her",
        "base64",
        "base32",
        "hex",
        "sha1",
        "sha256",
        "sha512",
        "md5",
        "utf8",
        "utf-8",
        "argon2",
        "argon2id",
        "bcrypt",
        "scrypt",
        "aes128",
        "aes256",
        "aes-256",
        "rs256",
        "hs256",
        "es256",
        "ed25519",
        "x509",
        "x.509",
        "pkcs8",
        "pkcs12",
        "oauth2",
        "oauth",
        "http2",
        "ipv4",
        "ipv6",
        "s3",
        "k8s",
        "2fa",
        "mfa",
        "totp",
    ]
)
# A value that is itself a name for a secret ("db-credentials", "engram-tokens").
_SECRET_NAME: Final = re.compile(r"(?i)^[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*$")
_NAME_PARTS: Final = frozenset(
    [
        "pass",
        "password",
        "passwords",
        "pwd",
        "token",
        "tokens",
        "key",
        "keys",
        "secret",
        "secrets",
        "credential",
        "credentials",
        "auth",
        "creds",
    ]
)
_PLACEHOLDER: Final = re.compile(
    r"""(?ix)^(?:
        x{3,}|\*+|\.{3,}|-+|_+|\#+|<[^>]*>?|\[[^\]]*\]?|\{[^}]*\}?|\(.*|
        \$.*|%[A-Za-z_]+%?|@[A-Za-z_]+@?|
        your[_-].*|my[_-].*|example.*|sample.*|dummy.*|fake.*|test[_-]?(?:token|key|password|secret)
    )$"""
)
_REFERENCE: Final = re.compile(
    r"""(?x)(?:\(|\bos\.environ|\bprocess\.env|\bgetenv|\benv\.|\bsecrets\.|\bsettings\.|
        \bconfig\.|\bvault:|\bref\+|arn:aws:secretsmanager|secretKeyRef|valueFrom)"""
)
_DOTTED_NAME: Final = re.compile(r"^[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+$")
_PATH: Final = re.compile(r"^(?:~?/|\.\.?/|[A-Za-z]:\\|\\\\)")
_URL: Final = re.compile(r"^[a-z][a-z0-9+.-]*://[^\s@]*$", re.I)
_NUMBER: Final = re.compile(r"^[+-]?\d[\d,._]*(?:[a-zA-Z%]{0,3})$")
_DATE: Final = re.compile(r"^\d{4}-\d{2}-\d{2}")
_CASE_INNER: Final = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")


@dataclass(frozen=True)
class ShapeHit:
    kind: str


def _strip(value: str) -> str:
    return value.strip(_TRAILING).strip()


def _value_passes(value: str, family: str, *, strong: bool) -> bool:
    """True when ``value`` is not a credential (placeholder, reference, word, count…).

    ``strong``: prose, where a key is often followed by an ordinary word ("the password is
    wrong"); the value must then look made-up (letters with digits, symbols or inner capitals).
    """
    v = _strip(value)
    if len(v) < 4:
        return True
    low = v.lower()
    if low in _STOPWORDS or _PLACEHOLDER.match(v) or _REFERENCE.search(v):
        return True
    if _PATH.match(v) or _URL.match(v) or _DOTTED_NAME.match(v) or _DATE.match(v):
        return True
    if len(set(low)) <= 2:
        return True
    if _SECRET_NAME.match(v) and _NAME_PARTS.intersection(re.split(r"[-_.]", low)):
        return True
    if _NUMBER.match(v):
        digits = sum(c.isdigit() for c in v)
        return not (family == "password" and digits >= 6 and v.isdigit())
    has_digit = any(c.isdigit() for c in v)
    has_alpha = any(c.isalpha() for c in v)
    has_symbol = any(not c.isalnum() and c not in "-_." for c in v)
    if strong:
        if len(v) < 6:
            return True
        return not ((has_digit and has_alpha) or has_symbol or bool(_CASE_INNER.search(v)))
    # An assignment: any made-up-looking value of some length is a credential.
    return not (len(v) >= 8 or has_digit or has_symbol)


def _starts_word(text: str, start: int) -> bool:
    if start == 0:
        return True
    before = text[start - 1]
    return not before.isalnum() or (before.islower() and text[start].isupper())


_PREFIX_SET: Final = frozenset(_PREFIXES)
_PREFIX_MAX: Final = max(map(len, _PREFIXES))


def _prefix_len(low: str, pos: int) -> int:
    before = low[max(0, pos - _PREFIX_MAX) : pos]
    if not before.endswith(_PREFIXES):
        return 0
    return next(n for n in range(len(before), 0, -1) if before[-n:] in _PREFIX_SET)


def _keyword_at(text: str, low: str, pos: int) -> tuple[int, int, str, bool] | None:
    """(start, end, family, identifier_key) when a credential keyword's core sits at ``pos``."""
    m = _TAIL.match(text, pos)
    if m is None:
        return None
    family = m.lastgroup or ""
    start = pos
    prefix = _prefix_len(low, pos)
    if family == "key":
        word = low[pos - prefix : pos].rstrip(" _-")
        if not (prefix and any(word.endswith(w) for w in _KEY_PREFIX_WORDS)):
            return None
        start = pos - prefix
    elif family in ("token", "secret") and prefix and _starts_word(text, pos - prefix):
        start = pos - prefix
    if not _starts_word(text, start):
        return None
    before = text[start - 1 : start] if start else ""
    line_start = text.rfind("\n", max(0, start - 8), start) + 1 if start else 0
    ident = (
        before in ('"', "'", "_", ".", "-", "`")
        # A key that begins its line, as YAML and .env keys do ("  password: …").
        or (start - line_start < 8 and not text[line_start:start].strip(" \t-"))
        or "_" in text[start : m.end()]
        or (text[start].isupper() and text[m.start() + 1 : m.end()].isupper())
    )
    return start, m.end(), family, ident


def _keywords(text: str) -> Iterator[tuple[int, int, str, bool]]:
    """Every credential keyword, in text order, examined lazily (a caller may stop early)."""
    low = text.lower()
    if len(low) != len(text):
        low = text.translate(_ASCII_LOWER)
    positions: list[int] = []
    for core in _CORES:
        pos = low.find(core)
        while pos != -1:
            positions.append(pos)
            pos = low.find(core, pos + 1)
    positions.sort()
    for pos in positions:
        hit = _keyword_at(text, low, pos)
        if hit is not None:
            yield hit


def find(text: str) -> ShapeHit | None:
    """The first credential named by its key in ``text``, or None."""
    # A keyword inside a value already judged ("password=password=…") is not judged again:
    # without this, repeated keywords cost one window each (measured 1.1 ms/KB).
    judged_until = 0
    for start, end, family, ident in _keywords(text):
        if start < judged_until:
            continue
        limit = end + _WINDOW
        a = _ASSIGN.match(text, end, limit)
        if a is not None:
            judged_until = a.end()
            quoted = bool(a.group("q"))
            strong = not (quoted or ident or a.group(0).lstrip()[:1] == "=")
            if not _value_passes(a.group("v"), family, strong=strong):
                return ShapeHit(f"{family} assignment")
            continue
        p = _PROSE.match(text, end, limit)
        if p is not None:
            judged_until = p.end()
            if not _value_passes(p.group("v"), family, strong=not p.group("q")):
                return ShapeHit(f"{family} in prose")
            continue
        if family == "password":
            d = _DIRECT.match(text, end, limit)
            if d is not None and not _value_passes(d.group("v"), family, strong=True):
                return ShapeHit("password in prose")
    for m in _ZH_KEYWORD.finditer(text):
        z = _ZH_ASSIGN.match(text, m.end(), m.end() + _WINDOW)
        if z is not None and not _value_passes(z.group("v"), "password", strong=True):
            return ShapeHit("credential in Chinese prose")
    return None

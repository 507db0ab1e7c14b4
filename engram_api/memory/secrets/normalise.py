"""The views of a text the guard scans: what a reader would see, not what the bytes say.

- NFKC with format characters (zero-width, soft hyphen, BOM, bidi marks: Unicode category Cf)
  removed, so full-width and zero-width disguises read as the plain key.
- Split keys rejoined: string concatenation (``"AKIA" + "IOSF…"``) and runs of upper-case
  chunks separated by spaces, hyphens or line breaks (``AKIA IOSF ODNN 7EXA MPLE``).
- Base64 runs decoded for a second look when they decode to readable text.

Every pattern here is linear in the input: chunk and run lengths are bounded, the separator
classes are disjoint from the chunk classes, and base64 decoding is capped at the input size.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from typing import Final

_CONCAT: Final = re.compile(r"""(["'])[ \t]*\+[ \t]*(?:\r?\n[ \t]*)?\1""")
# A quick search finds where two upper-case chunks meet; the anchored run pattern then takes the
# whole run from there (the \\b-framed pattern run over all text cost 0.5 ms/KB, measured).
_UPPER_PAIR: Final = re.compile(r"[A-Z0-9]{2,20}[ \t\r\n-]{1,3}[A-Z0-9]{2,20}")
_UPPER_RUN: Final = re.compile(
    r"[A-Z0-9]{2,20}(?:[ \t\r\n-]{1,3}[A-Z0-9]{2,20}){1,15}(?![A-Za-z0-9])"
)
_CF_CHARS: Final = "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf")
_CF_TABLE: Final = dict.fromkeys(map(ord, _CF_CHARS))
# A set test is 10x faster than a character-class search over the same text (measured).
_CF_SET: Final = frozenset(_CF_CHARS)
_SEPARATORS: Final = re.compile(r"[ \t\r\n-]")
_B64_RUN: Final = re.compile(r"[A-Za-z0-9+/_-]{16,4096}={0,2}")
_MIN_JOINED: Final = 16


def clean(text: str) -> str:
    """NFKC, without format characters."""
    if text.isascii():
        return text
    if not _CF_SET.isdisjoint(text):
        text = text.translate(_CF_TABLE)
    if unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", text)


def _join_upper_runs(text: str) -> str:
    parts: list[str] = []
    done = 0
    pos = 0
    while (pair := _UPPER_PAIR.search(text, pos)) is not None:
        start = pair.start()
        if start > 0 and text[start - 1].isalnum():
            pos = start + 1
            continue
        run = _UPPER_RUN.match(text, start)
        if run is None:
            pos = start + 1
            continue
        joined = _SEPARATORS.sub("", run.group(0))
        if len(joined) >= _MIN_JOINED:
            parts.append(text[done:start])
            parts.append(joined)
            done = run.end()
        pos = run.end()
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def rejoined(text: str) -> str:
    """The text with split keys put back together (the same text when nothing was split)."""
    return _join_upper_runs(_CONCAT.sub("", text))


def _readable(raw: bytes) -> str | None:
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(1 for c in decoded if c.isprintable() or c in "\n\r\t")
    return decoded if decoded and printable >= 0.95 * len(decoded) else None


def decoded_blobs(text: str) -> list[str]:
    """Readable texts hidden in base64 runs, at most as many bytes as the input holds."""
    out: list[str] = []
    budget = len(text)
    for m in _B64_RUN.finditer(text):
        run = m.group(0)
        if budget <= 0:
            break
        budget -= len(run)
        body = run.rstrip("=")
        padded = body + "=" * (-len(body) % 4)
        try:
            raw = (
                base64.urlsafe_b64decode(padded)
                if ("-" in body or "_" in body)
                else base64.b64decode(padded, validate=True)
            )
        except (binascii.Error, ValueError):
            continue
        readable = _readable(raw)
        if readable is not None and len(readable) >= 8:
            out.append(readable)
    return out


def views(text: str) -> list[str]:
    """Every view to scan: the cleaned text, its rejoined form, and decoded base64 blobs."""
    base = clean(text)
    out = [base]
    joined = rejoined(base)
    if joined != base:
        out.append(joined)
    out.extend(clean(blob) for blob in decoded_blobs(base))
    return out

"""Keeping API keys out of messages: provider error text is scrubbed before we repeat it."""

from __future__ import annotations

from collections.abc import Iterable

_MAX_DETAIL = 200


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and anything longer than a line) removed."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = " ".join(text.split())
    if len(text) > _MAX_DETAIL:
        text = text[: _MAX_DETAIL - 1] + "…"
    return text

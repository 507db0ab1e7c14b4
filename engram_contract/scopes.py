"""Scope grammar shared by the service, the permission config and the CRDs.

Scopes: ``global``, ``dm`` (the shared DM bucket), ``dm:<id>``, ``group:<id>``, ``agent:<name>``.
Search-only scopes: ``all`` and ``cross:<group-id>``. Ids are 1-128 chars of ``[A-Za-z0-9._-]``.
Patterns (permission config): an exact scope, or ``<kind>:*`` which matches every non-empty id
of that kind. Nothing else is a wildcard, so a pattern can never match an empty id.
"""

from __future__ import annotations

import re
from typing import Final, Literal

ScopeKind = Literal["global", "dm", "group", "agent"]

SCOPE_KINDS_WITH_ID: Final = ("dm", "group", "agent")
ID_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")
SCOPE_RE: Final = re.compile(r"global|dm|(?:dm|group|agent):[A-Za-z0-9._-]{1,128}")
SCOPE_PATTERN_RE: Final = re.compile(r"global|dm|(?:dm|group|agent):(?:\*|[A-Za-z0-9._-]{1,128})")
# The same grammars as JSON-schema patterns (anchored), for CRDs and values schemas.
SCOPE_JSON_PATTERN: Final = r"^(global|dm|(dm|group|agent):[A-Za-z0-9._-]{1,128})$"
SCOPE_PATTERN_JSON_PATTERN: Final = r"^(global|dm|(dm|group|agent):(\*|[A-Za-z0-9._-]{1,128}))$"

SCOPE_RULE: Final = (
    "must be 'global', 'dm', or one of 'dm:<id>', 'group:<id>', 'agent:<id>' "
    "where <id> is 1-128 characters of A-Z a-z 0-9 . _ -"
)
PATTERN_RULE: Final = SCOPE_RULE + ", or '<kind>:*' to match every id of that kind"


def is_scope(value: str) -> bool:
    """True for a concrete, writable scope."""
    return SCOPE_RE.fullmatch(value) is not None


def is_scope_pattern(value: str) -> bool:
    return SCOPE_PATTERN_RE.fullmatch(value) is not None


def scope_kind(scope: str) -> ScopeKind:
    """The kind of a concrete scope (``dm`` and ``dm:<id>`` are both ``dm``)."""
    kind = scope.split(":", 1)[0]
    if kind in ("global", "dm", "group", "agent"):
        return kind  # type: ignore[return-value]
    raise ValueError(f"not a scope: {scope!r}")


def pattern_matches(pattern: str, scope: str) -> bool:
    """Whether a permission pattern covers a concrete scope."""
    if pattern.endswith(":*"):
        kind = pattern[:-2]
        return scope.startswith(kind + ":") and ID_RE.fullmatch(scope[len(kind) + 1 :]) is not None
    return pattern == scope


def any_pattern_matches(patterns: list[str] | tuple[str, ...], scope: str) -> bool:
    return any(pattern_matches(p, scope) for p in patterns)

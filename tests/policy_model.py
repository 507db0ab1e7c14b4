"""The reference model of the permission policy: what each tool call may reveal or change.

Written from the rules (DESIGN.md §2-4, docs/configuration.md), independently of
``engram_api.memory.policy`` and ``engram_contract.scopes``, so that the property and fuzz
tests hold the service to the rules rather than to itself. Every function is a direct reading
of one rule, over plain values; nothing here touches a store.

Rules:
- A pattern is an exact scope, or ``<kind>:*``: every scope ``<kind>:<id>`` with a non-empty id.
  ``dm:*`` therefore does not cover the bare ``dm`` bucket, and nothing covers an empty id.
- Reads (search, get_all, status) see active memories of readable scopes only; get_all can
  add the archived ones of the same scopes.
- Search of a concrete scope needs read on it and adds ``global`` when that is readable;
  ``cross:<g>`` is ``group:<g>`` (which must be readable) plus readable ``global``; ``all`` is
  every readable scope and is refused when nothing is readable.
- add needs the add operation, a writable scope and an allowed type; ``user_direct`` needs
  ``allow_user_direct``. Its answer shows the memory only to a caller that may read the scope.
- forget and restore need the forget operation; a memory in an unreadable scope is "not found"
  (its existence is not revealed); a readable one needs a writable scope to change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

TRUST_RANK: Final = {"low": 1, "medium": 2, "high": 3}
ID_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")

Refusal = Literal["permission_denied", "not_found", "invalid_input"]


@dataclass(frozen=True)
class Policy:
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    ops: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()
    max_trust: str = "medium"
    allow_user_direct: bool = False


@dataclass(frozen=True)
class Mem:
    id: str
    scope: str
    mem_type: str
    trust: str
    archived: bool
    content: str = ""


@dataclass(frozen=True)
class Refused:
    kind: Refusal


@dataclass(frozen=True)
class Seen:
    """What a read may return: these ids, and nothing else."""

    ids: frozenset[str]
    scopes_searched: tuple[str, ...] = ()


@dataclass(frozen=True)
class Counts:
    active: int
    archived: int
    by_scope: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, int] = field(default_factory=dict)
    by_trust: dict[str, int] = field(default_factory=dict)


def valid_id(ident: str) -> bool:
    return 1 <= len(ident) <= 128 and set(ident) <= ID_CHARS


def valid_scope(scope: str) -> bool:
    if scope in ("global", "dm"):
        return True
    kind, sep, ident = scope.partition(":")
    return sep == ":" and kind in ("dm", "group", "agent") and valid_id(ident)


def covers(pattern: str, scope: str) -> bool:
    if pattern.endswith(":*"):
        kind, sep, ident = scope.partition(":")
        return sep == ":" and kind == pattern[:-2] and ident != ""
    return pattern == scope


def may_read(p: Policy, scope: str) -> bool:
    return any(covers(pat, scope) for pat in p.read)


def may_write(p: Policy, scope: str) -> bool:
    return any(covers(pat, scope) for pat in p.write)


def _filtered(
    mems: Iterable[Mem], scopes: Iterable[str] | None, mem_type: str | None, trust_min: str | None
) -> frozenset[str]:
    chosen = None if scopes is None else set(scopes)
    floor = TRUST_RANK[trust_min] if trust_min else 0
    return frozenset(
        m.id
        for m in mems
        if not m.archived
        and (m.scope in chosen if chosen is not None else True)
        and (mem_type is None or m.mem_type == mem_type)
        and TRUST_RANK[m.trust] >= floor
    )


def search(
    p: Policy,
    mems: Iterable[Mem],
    scope: str,
    *,
    mem_type: str | None = None,
    trust_min: str | None = None,
) -> Seen | Refused:
    if "search" not in p.ops:
        return Refused("permission_denied")
    mems = list(mems)
    if scope == "all":
        readable = {m.scope for m in mems if may_read(p, m.scope)}
        if not p.read:
            return Refused("permission_denied")
        return Seen(_filtered(mems, readable, mem_type, trust_min), ("all",))
    if scope.startswith("cross:"):
        group = scope[len("cross:") :]
        if not valid_id(group):
            return Refused("invalid_input")
        target = f"group:{group}"
    elif valid_scope(scope):
        target = scope
    else:
        return Refused("invalid_input")
    if not may_read(p, target):
        return Refused("permission_denied")
    searched = (target, "global") if target != "global" and may_read(p, "global") else (target,)
    return Seen(_filtered(mems, searched, mem_type, trust_min), searched)


def get_all(
    p: Policy,
    mems: Iterable[Mem],
    scope: str | None = None,
    *,
    mem_type: str | None = None,
    include_archived: bool = False,
) -> Seen | Refused:
    if "get_all" not in p.ops:
        return Refused("permission_denied")
    if scope is not None:
        if not valid_scope(scope):
            return Refused("invalid_input")
        if not may_read(p, scope):
            return Refused("permission_denied")
    return Seen(
        frozenset(
            m.id
            for m in mems
            if (m.scope == scope if scope is not None else may_read(p, m.scope))
            and (include_archived or not m.archived)
            and (mem_type is None or m.mem_type == mem_type)
        )
    )


def status(p: Policy, mems: Iterable[Mem]) -> Counts | Refused:
    if "status" not in p.ops:
        return Refused("permission_denied")
    readable = [m for m in mems if may_read(p, m.scope)]
    active = [m for m in readable if not m.archived]
    return Counts(
        active=len(active),
        archived=len(readable) - len(active),
        by_scope=dict(Counter(m.scope for m in active)),
        by_type=dict(Counter(m.mem_type for m in active)),
        by_trust=dict(Counter(m.trust for m in active)),
    )


AddOutcome = Literal["stored", "duplicate", "blind"]


def add(
    p: Policy,
    mems: Iterable[Mem],
    *,
    content: str,
    scope: str,
    mem_type: str,
    source: str = "agent_output",
) -> tuple[AddOutcome, str | None] | Refused:
    """What add answers: the memory it may show (its own new one, or the existing duplicate's
    id), or ``blind``: an answer that shows no memory at all, the same whether the text was new
    or not, because the caller may not read the scope."""
    if not valid_scope(scope):
        return Refused("invalid_input")
    if "add" not in p.ops or not may_write(p, scope) or mem_type not in p.types:
        return Refused("permission_denied")
    if source == "user_direct" and not p.allow_user_direct:
        return Refused("permission_denied")
    if not may_read(p, scope):
        return ("blind", None)
    for m in mems:
        if (
            not m.archived
            and m.scope == scope
            and m.mem_type == mem_type
            and m.content == content.strip()
        ):
            return ("duplicate", m.id)
    return ("stored", None)


ChangeOutcome = Literal["archived", "already_archived", "restored", "not_archived"]


def forget(p: Policy, mems: Mapping[str, Mem], memory_id: str) -> ChangeOutcome | Refused:
    found = _changeable(p, mems, memory_id)
    if isinstance(found, Refused):
        return found
    return "already_archived" if found.archived else "archived"


def restore(p: Policy, mems: Mapping[str, Mem], memory_id: str) -> ChangeOutcome | Refused:
    found = _changeable(p, mems, memory_id)
    if isinstance(found, Refused):
        return found
    return "restored" if found.archived else "not_archived"


def _changeable(p: Policy, mems: Mapping[str, Mem], memory_id: str) -> Mem | Refused:
    if "forget" not in p.ops:
        return Refused("permission_denied")
    found = mems.get(memory_id)
    if found is None or not may_read(p, found.scope):
        return Refused("not_found")
    if not may_write(p, found.scope):
        return Refused("permission_denied")
    return found

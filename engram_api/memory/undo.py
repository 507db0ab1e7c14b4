"""Undo that lasts: a restored memory is not archived again by the step that archived it.

``MemoryService.restore`` records the decision on the memory: ``restored`` (what was undone:
the step, its reason, when, by whom) and, for a merge or a conflict, ``kept_apart`` (the
memory it must not be merged into or superseded by again). Steps ask here before acting and
report what they skipped and why. An explicit forget still archives the memory.
"""

from __future__ import annotations

from typing import Any, Final

# archived_reason prefix -> the step that archives with it.
STEP_OF_REASON: Final = (
    ("duplicate", "dedup"),
    ("conflict", "conflicts"),
    ("superseded", "conflicts"),
    ("decay", "decay"),
    ("consolidated", "consolidation"),
)


def step_of(reason: str, archived_by: str) -> str:
    if archived_by != "maintenance":
        return "forget"
    for prefix, step in STEP_OF_REASON:
        if reason.startswith(prefix):
            return step
    return "maintenance"


def restore_record(payload: dict[str, Any], *, agent: str, stamp: str) -> dict[str, Any]:
    """The payload update that restores ``payload`` and remembers what was undone."""
    reason = str(payload.get("archived_reason", ""))
    step = step_of(reason, str(payload.get("archived_by", "")))
    entry = {"step": step, "reason": reason, "restored_at": stamp, "restored_by": agent}
    other = str(payload.get("superseded_by") or payload.get("consolidated_into") or "")
    if other:
        entry["other"] = other
    update: dict[str, Any] = {
        "archived": 0,
        "archived_reason": "",
        "superseded_by": "",
        "updated_at": stamp,
        "restored": [*list(payload.get("restored") or []), entry],
    }
    if other and step in ("dedup", "conflicts"):
        update["kept_apart"] = sorted({*[str(x) for x in payload.get("kept_apart") or []], other})
    return update


def kept_apart(a: tuple[str, dict[str, Any]], b: tuple[str, dict[str, Any]]) -> str | None:
    """Why ``a`` and ``b`` must not be merged or resolved against each other, or None."""
    for (x, px), (y, _) in ((a, b), (b, a)):
        if y in (px.get("kept_apart") or []):
            undone = reversed(px.get("restored") or [])
            entry: dict[str, Any] = next((e for e in undone if e.get("other") == y), {})
            who = entry.get("restored_by", "someone")
            return f"{x} was restored by {who} after being archived against {y}"
    return None


def restored_from(payload: dict[str, Any], step: str) -> dict[str, Any] | None:
    """The restore entry that undid ``step`` on this memory, if any."""
    for e in reversed(payload.get("restored") or []):
        if isinstance(e, dict) and e.get("step") == step:
            return e
    return None

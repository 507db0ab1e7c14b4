"""The ``Ready`` condition every Engram resource reports, Kubernetes style."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from engram_operator.naming import READY

MESSAGE_MAX: Final = 1024


@dataclass(frozen=True)
class Refusal:
    """Why a reconcile did not reach Ready; the status already says so.

    Permanent refusals (a bad spec, a child the API server rejects, missing rights) wait for
    a change or the next resync; the others are retried by kopf with a backoff.
    """

    message: str
    permanent: bool = True


def utc_now() -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes writes its own timestamps."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ready_condition(
    *,
    ready: bool,
    reason: str,
    message: str,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]] | None,
    now: str,
) -> dict[str, Any]:
    """A Ready condition; ``lastTransitionTime`` moves only when the status flips."""
    status = "True" if ready else "False"
    since = now
    for cond in previous or ():
        if cond.get("type") == READY and cond.get("status") == status:
            since = str(cond.get("lastTransitionTime") or now)
    condition: dict[str, Any] = {
        "type": READY,
        "status": status,
        "reason": reason,
        "message": message[:MESSAGE_MAX],
        "lastTransitionTime": since,
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition

"""Merging duplicates: who survives, and what the survivor inherits.

The survivor is the highest trust, then the most accessed, then the newest (then the smallest
id, so the choice is deterministic). It inherits the summed access counts, the latest access
time and the losers' contexts; the losers are archived with ``superseded_by`` and stay
restorable. Merging is idempotent: a loser already listed in the survivor's ``merged_from``
is not counted twice if a run is repeated after a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram_contract.permissions import Trust

from .context import RunContext
from .neighbours import PairScan
from .report import ARCHIVED, MERGED, StepReport


def rank(memory_id: str, payload: dict[str, Any]) -> tuple[int, int, float, str]:
    """Sort key, highest first (the id is inverted so the smaller id wins a full tie)."""
    try:
        trust = Trust(payload.get("trust", "medium")).rank
    except ValueError:
        trust = Trust.low.rank
    inverted_id = "".join(chr(0x10FFFF - ord(c)) for c in memory_id)
    return (
        trust,
        int(payload.get("access_count", 0) or 0),
        float(payload.get("created_at_epoch", 0.0) or 0.0),
        inverted_id,
    )


def star_clusters(scan: PairScan) -> list[tuple[str, list[str]]]:
    """Clusters as stars: the best unassigned memory takes its unassigned neighbours.

    Every loser is itself above the threshold against its survivor, so a chain
    A~B~C never merges A with a C it does not resemble.
    """
    adj = scan.adjacency()
    order = sorted(adj, key=lambda i: rank(i, scan.payloads[i]), reverse=True)
    assigned: set[str] = set()
    out: list[tuple[str, list[str]]] = []
    for node in order:
        if node in assigned:
            continue
        members = sorted(m for m in adj[node] if m not in assigned)
        if not members:
            continue
        assigned.add(node)
        assigned.update(members)
        out.append((node, members))
    return out


def _merged_context(contexts: Sequence[str], limit: int) -> str:
    out = ""
    for c in contexts:
        c = c.strip()
        if not c or c in out:
            continue
        candidate = f"{out}\n{c}" if out else c
        if len(candidate) > limit:
            # The rest stays on the archived losers: nothing is lost, only not copied.
            break
        out = candidate
    return out


def merge(
    ctx: RunContext,
    step: StepReport,
    survivor: str,
    losers: Sequence[str],
    payloads: dict[str, dict[str, Any]],
    *,
    reason: str = "duplicate",
) -> None:
    sp = payloads[survivor]
    already = [str(x) for x in sp.get("merged_from") or []]
    fresh = [lid for lid in losers if lid not in already]
    access = int(sp.get("access_count", 0) or 0) + sum(
        int(payloads[lid].get("access_count", 0) or 0) for lid in fresh
    )
    accessed = [str(payloads[i].get("last_accessed_at") or "") for i in (survivor, *losers)]
    update: dict[str, Any] = {
        "access_count": access,
        "context": _merged_context(
            [str(payloads[i].get("context", "")) for i in (survivor, *losers)],
            ctx.service.limits.context_max_chars,
        ),
        "merged_from": already + fresh,
        "updated_at": ctx.stamp,
    }
    if max(accessed):
        update["last_accessed_at"] = max(accessed)
    # Queued (the caller flushes). The survivor first: if the run dies between the two
    # writes, the losers are still
    # active and the next run merges them again without double counting (merged_from).
    ctx.queue_payload([survivor], update)
    ctx.queue_archive(list(losers), reason, superseded_by=survivor)
    step.count(MERGED, len(losers))
    step.count(ARCHIVED, len(losers))
    step.add_ids("survivors", [survivor])
    step.add_ids("archived", list(losers))

"""Turn a finished maintenance Job (and its pod) into a run record (pure; no API calls).

The pod's termination message carries the run's ``ENGRAM_SUMMARY`` line. Whatever goes wrong —
the Job failed, the pod is gone, the message is missing or malformed, it reports another task —
the run is recorded as ``Failed`` with the reason; nothing here raises on bad input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from engram_contract.report import MaintenanceSummary, RunResult, Task, parse_summary
from engram_operator.conditions import MESSAGE_MAX
from engram_operator.models import COUNT_MAX, RunRecord
from engram_operator.naming import CONTAINER_NAME


@dataclass(frozen=True)
class JobOutcome:
    succeeded: bool
    finished_at: str | None
    reason: str
    message: str


def job_outcome(job: Mapping[str, Any]) -> JobOutcome | None:
    """The Job's terminal condition, or None while it is still running."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True" or cond.get("type") not in ("Complete", "Failed"):
            continue
        return JobOutcome(
            succeeded=cond["type"] == "Complete",
            finished_at=cond.get("lastTransitionTime"),
            reason=str(cond.get("reason") or cond["type"]),
            message=str(cond.get("message") or ""),
        )
    return None


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def termination_message(pods: Iterable[Mapping[str, Any]], job_uid: str) -> str | None:
    """The engram container's termination message from the Job's newest pod that has one.

    Pods are matched by owner uid, not only by the label selector used to list them.
    """
    owned = [pod for pod in pods if _owned_by(pod, job_uid)]
    owned.sort(key=lambda pod: str(pod["metadata"].get("creationTimestamp") or ""), reverse=True)
    for pod in owned:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != CONTAINER_NAME:
                continue
            for state_key in ("state", "lastState"):
                terminated = (status.get(state_key) or {}).get("terminated") or {}
                if terminated.get("message"):
                    return str(terminated["message"])
    return None


def summarise_run(
    job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], task: Task
) -> RunRecord | None:
    """The run record for a finished Job, or None if it has not finished."""
    outcome = job_outcome(job)
    if outcome is None:
        return None
    meta = job.get("metadata") or {}
    status = job.get("status") or {}
    text = termination_message(pods, str(meta.get("uid", "")))

    summary: MaintenanceSummary | None = None
    problem = ""
    if text is None:
        problem = "no termination message (the pod is gone or wrote none)"
    else:
        try:
            summary = parse_summary(text)
        except ValueError as exc:
            problem = str(exc)
        if summary is not None and summary.task is not task:
            problem = f"the summary is for task {summary.task.value!r}, not {task.value!r}"
            summary = None

    if not outcome.succeeded:
        result = RunResult.failed
        message = f"job failed: {outcome.reason}"
        if outcome.message:
            message += f": {outcome.message}"
        detail = summary.message if summary is not None and summary.message else problem
        if detail:
            message += f"; {detail}"
    elif summary is None:
        result = RunResult.failed
        message = f"job completed but its result is unknown: {problem}"
    else:
        result = summary.result
        message = summary.message

    counts: dict[str, int] = {}
    if summary is not None:
        counts = {
            key: min(getattr(summary, key), COUNT_MAX)
            for key in ("merged", "archived", "created", "conflicts", "errors")
        }
    return RunRecord(
        job=str(meta.get("name", "")),
        start_time=status.get("startTime") or (summary.started_at if summary else None),
        completion_time=(
            status.get("completionTime")
            or outcome.finished_at
            or (summary.finished_at if summary else None)
        ),
        result=result,
        message=message[:MESSAGE_MAX],
        **counts,
    )


def parse_history(status: Mapping[str, Any]) -> list[RunRecord]:
    """The run records already in a status; entries that do not parse are dropped."""
    records = []
    for item in status.get("history") or []:
        try:
            records.append(RunRecord.model_validate(item))
        except ValidationError:
            continue
    return records


def _newest_first(record: RunRecord) -> str:
    return record.start_time or record.completion_time or ""


def merge_history(history: Sequence[RunRecord], record: RunRecord, limit: int) -> list[RunRecord]:
    """Add or replace ``record`` (by Job name), newest first, at most ``limit`` entries."""
    merged = [old for old in history if old.job != record.job] + [record]
    merged.sort(key=_newest_first, reverse=True)
    return merged[:limit]

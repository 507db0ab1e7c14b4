"""The JSON report every run writes under ``<data_dir>/reports/`` and its compact summary.

A report holds counts, ids, error messages, timings and tokens, and per action (merged,
superseded, flagged, kept, decayed, consolidated, skipped) the memory's text cut to one line with
its survivor or reason, so a person can read what happened. Memory text passed the secret guard
when it was stored; error messages never carry it. ``latest_reports`` is what
``mem0_maintenance report_only`` returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from engram_contract.report import MaintenanceSummary, RunResult, Task

StepStatus = Literal["ok", "skipped", "stopped", "failed"]
REPORTS_DIR: Final = "reports"
# Conventional count keys that the summary adds up across steps.
ARCHIVED: Final = "archived"
CREATED: Final = "created"
MERGED: Final = "merged"
RESOLVED: Final = "conflicts_resolved"
_MAX_ERRORS_PER_STEP: Final = 200
_MAX_ACTIONS_PER_STEP: Final = 1000
LINE_CHARS: Final = 100


def line(text: object, limit: int = LINE_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class StepReport:
    name: str
    status: StepStatus = "ok"
    # Why the step was skipped or stopped.
    reason: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    ids: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    errors_dropped: int = 0
    # What was done to which memory, readable: {"action", "id", "text", "survivor", ...}.
    actions: list[dict[str, Any]] = field(default_factory=list)
    actions_dropped: int = 0
    elapsed_s: float = 0.0
    tokens: dict[str, int] = field(default_factory=dict)
    # Thresholds and limits the step used (so a report explains its own decisions).
    params: dict[str, Any] = field(default_factory=dict)

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def add_ids(self, key: str, ids: list[str] | set[str] | tuple[str, ...]) -> None:
        self.ids.setdefault(key, []).extend(sorted(ids) if isinstance(ids, set) else ids)

    def error(self, message: str) -> None:
        if len(self.errors) < _MAX_ERRORS_PER_STEP:
            self.errors.append(message)
        else:
            self.errors_dropped += 1

    def act(self, action: str, memory_id: str, text: object, **extra: Any) -> None:
        """One readable action; ``survivor_text`` and other texts are cut to a line too."""
        if len(self.actions) >= _MAX_ACTIONS_PER_STEP:
            self.actions_dropped += 1
            return
        entry: dict[str, Any] = {"action": action, "id": memory_id, "text": line(text)}
        for k, v in extra.items():
            entry[k] = line(v) if k.endswith("_text") else v
        self.actions.append(entry)

    def skip(self, reason: str) -> None:
        self.status = "skipped"
        self.reason = reason

    def stop(self, reason: str) -> None:
        self.status = "stopped"
        self.reason = reason

    @property
    def error_count(self) -> int:
        return len(self.errors) + self.errors_dropped

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "counts": dict(self.counts),
            "ids": {k: list(v) for k, v in self.ids.items()},
            "errors": list(self.errors),
            "elapsed_s": round(self.elapsed_s, 3),
        }
        if self.actions:
            out["actions"] = list(self.actions)
        if self.actions_dropped:
            out["actions_dropped"] = self.actions_dropped
        if self.reason:
            out["reason"] = self.reason
        if self.errors_dropped:
            out["errors_dropped"] = self.errors_dropped
        if self.tokens:
            out["tokens"] = dict(self.tokens)
        if self.params:
            out["params"] = dict(self.params)
        return out


@dataclass
class MaintenanceReport:
    task: Task
    dry_run: bool
    collection: str
    store_kind: str
    started_at: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    embedding_model: str = ""
    finished_at: str = ""
    elapsed_s: float = 0.0
    result: RunResult = RunResult.succeeded
    message: str = ""
    steps: list[StepReport] = field(default_factory=list)
    llm: dict[str, Any] = field(default_factory=dict)
    # Where the run's thresholds came from (model profile or explicit settings).
    similarity: dict[str, Any] = field(default_factory=dict)

    def step(self, name: str) -> StepReport:
        s = StepReport(name)
        self.steps.append(s)
        return s

    def total(self, key: str) -> int:
        return sum(s.counts.get(key, 0) for s in self.steps)

    @property
    def error_count(self) -> int:
        return sum(s.error_count for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task.value,
            "result": self.result.value,
            "dry_run": self.dry_run,
            "collection": self.collection,
            "store": self.store_kind,
            "embedding_model": self.embedding_model,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_s": round(self.elapsed_s, 3),
            "message": self.message,
            "totals": {
                ARCHIVED: self.total(ARCHIVED),
                CREATED: self.total(CREATED),
                MERGED: self.total(MERGED),
                RESOLVED: self.total(RESOLVED),
                "errors": self.error_count,
            },
            "similarity": dict(self.similarity),
            "llm": dict(self.llm),
            "steps": [s.to_dict() for s in self.steps],
        }

    def summary(self) -> MaintenanceSummary:
        return MaintenanceSummary(
            task=self.task,
            result=self.result,
            dry_run=self.dry_run,
            started_at=self.started_at,
            finished_at=self.finished_at or self.started_at,
            elapsed_s=round(self.elapsed_s, 3),
            merged=self.total(MERGED),
            archived=self.total(ARCHIVED),
            created=self.total(CREATED),
            conflicts=self.total(RESOLVED),
            errors=self.error_count,
            skipped_steps=[s.name for s in self.steps if s.status == "skipped"][:16],
            message=self.message[:1024],
            report_id=self.id,
        )


def reports_dir(data_dir: Path) -> Path:
    return data_dir / REPORTS_DIR


def _file_name(report: MaintenanceReport) -> str:
    stamp = datetime.fromisoformat(report.started_at.replace("Z", "+00:00"))
    return f"{stamp.strftime('%Y%m%dT%H%M%S.%f')}-{report.task.value}-{report.id[:12]}.json"


def save_report(data_dir: Path, report: MaintenanceReport, *, keep: int) -> Path:
    """Write the report atomically and drop the oldest beyond ``keep``."""
    folder = reports_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / _file_name(report)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report.to_dict(), indent=2, sort_keys=False), encoding="utf-8")
    os.replace(tmp, path)
    files = sorted(folder.glob("*.json"))
    for old in files[: max(0, len(files) - keep)]:
        with contextlib.suppress(OSError):
            old.unlink()
    return path


def _trim_ids(report: dict[str, Any], max_ids: int) -> dict[str, Any]:
    for step in report.get("steps", []):
        ids = step.get("ids", {})
        for key, values in list(ids.items()):
            if len(values) > max_ids:
                ids[key] = values[:max_ids]
                step.setdefault("ids_truncated", {})[key] = len(values) - max_ids
        actions = step.get("actions", [])
        if len(actions) > max_ids:
            step["actions"] = actions[:max_ids]
            step["actions_truncated"] = len(actions) - max_ids
    return report


def latest_reports(data_dir: Path, limit: int = 5, *, max_ids: int = 50) -> list[dict[str, Any]]:
    """The newest ``limit`` reports, newest first, each id list cut to ``max_ids``.

    File names start with the run's UTC start time, so name order is time order. A file that
    cannot be read (a run writing it right now, a hand edit) is left out.
    """
    folder = reports_dir(data_dir)
    if limit <= 0 or not folder.is_dir():
        return []
    out: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json"), reverse=True):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out.append(_trim_ids(data, max_ids))
        if len(out) >= limit:
            break
    return out

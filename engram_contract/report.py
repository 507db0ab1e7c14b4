"""The compact maintenance summary: the last line a maintenance Job prints and writes as its
termination message, and what the operator copies into ``EngramMaintenance.status.lastRun``.

Kubernetes keeps at most 4096 bytes of a termination message, so the summary carries counts,
never ids or content.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

SUMMARY_MAX_BYTES: Final = 4096
SUMMARY_PREFIX: Final = "ENGRAM_SUMMARY "


class Task(StrEnum):
    daily = "daily"
    weekly = "weekly"
    backup = "backup"


class RunResult(StrEnum):
    succeeded = "Succeeded"
    failed = "Failed"
    skipped = "Skipped"


class MaintenanceSummary(BaseModel):
    model_config = ConfigDict(extra="ignore")

    task: Task
    result: RunResult
    dry_run: bool = False
    started_at: str
    finished_at: str
    elapsed_s: float = Field(ge=0)
    merged: int = Field(default=0, ge=0)
    archived: int = Field(default=0, ge=0)
    created: int = Field(default=0, ge=0)
    conflicts: int = Field(default=0, ge=0)
    errors: int = Field(default=0, ge=0)
    skipped_steps: list[str] = Field(default_factory=list, max_length=16)
    message: str = Field(default="", max_length=1024)
    report_id: str = Field(default="", max_length=128)

    def to_line(self) -> str:
        line = SUMMARY_PREFIX + json.dumps(self.model_dump(mode="json"), separators=(",", ":"))
        if len(line.encode()) > SUMMARY_MAX_BYTES:
            # Only the free-text message can grow; trim it rather than lose the counts.
            trimmed = self.model_copy(update={"message": self.message[:200]})
            line = SUMMARY_PREFIX + json.dumps(
                trimmed.model_dump(mode="json"), separators=(",", ":")
            )
        return line


def parse_summary(text: str) -> MaintenanceSummary:
    """Parse the summary from a termination message or log tail (the last prefixed line wins).

    Raises ``ValueError`` with a reason when there is no well-formed summary.
    """
    candidates = [ln for ln in text.splitlines() if ln.startswith(SUMMARY_PREFIX)]
    if not candidates:
        raise ValueError("no summary line in the termination message")
    try:
        return MaintenanceSummary.model_validate_json(candidates[-1][len(SUMMARY_PREFIX) :])
    except ValueError as exc:
        raise ValueError(f"malformed summary line: {exc}") from None

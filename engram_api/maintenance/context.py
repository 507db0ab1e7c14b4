"""What every step of one run shares: the engine, settings, clock, LLM, and what was archived.

Steps write through :meth:`RunContext.set_payload` so a dry run changes nothing while still
computing exactly what it would change. ``archived`` holds every id archived (or, in a dry
run, that would be) so later steps of the same run never pick it up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engram_api.llm.budget import BudgetedLLM
from engram_api.memory.model import rfc3339
from engram_api.memory.service import MemoryService
from engram_api.runtime import Engine
from engram_api.store.base import MemoryStore

from .config import MaintenanceSettings, SimilarityProfile
from .progress import Progress, no_progress
from .report import MaintenanceReport

ARCHIVED_BY = "maintenance"
_FLUSH_BATCH = 512


@dataclass
class RunContext:
    engine: Engine
    settings: MaintenanceSettings
    report: MaintenanceReport
    now: datetime
    profile: SimilarityProfile
    dry_run: bool = False
    progress: Progress = no_progress
    llm: BudgetedLLM | None = None
    # Why there is no LLM (set when ``llm`` is None).
    no_llm_reason: str = ""
    # Set when the token budget ran out; every later LLM step is skipped with it.
    budget_reason: str = ""
    archived: set[str] = field(default_factory=set)
    # Task logs whose consolidation is pending (budget, errors): decay spares them this run.
    protected: set[str] = field(default_factory=set)
    # Whether consolidation looked for clusters this run (decay looks itself otherwise).
    consolidation_checked: bool = False

    @property
    def store(self) -> MemoryStore:
        return self.engine.store

    @property
    def service(self) -> MemoryService:
        return self.engine.service

    @property
    def now_epoch(self) -> float:
        return self.now.timestamp()

    @property
    def stamp(self) -> str:
        return rfc3339(self.now)

    def llm_blocker(self) -> str | None:
        """Why an LLM step cannot run now, or None."""
        if self.llm is None:
            return self.no_llm_reason or "no LLM configured"
        if self.budget_reason:
            return self.budget_reason
        return None

    def archive_payload(self, reason: str, **extra: Any) -> dict[str, Any]:
        return {
            "archived": 1,
            "archived_reason": reason,
            "archived_at": self.stamp,
            "archived_by": ARCHIVED_BY,
            "updated_at": self.stamp,
            **extra,
        }

    # Queued writes (see queue_payload), applied in order by flush().
    pending: list[tuple[list[str], dict[str, Any]]] = field(default_factory=list)

    def queue_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        """A write applied by the next :meth:`flush`, batched with others: one store write
        (and one disk flush) for many merges instead of one each."""
        if ids and not self.dry_run:
            self.pending.append((list(ids), payload))

    def queue_archive(self, ids: Sequence[str], reason: str, **extra: Any) -> None:
        self.queue_payload(ids, self.archive_payload(reason, **extra))
        self.archived.update(ids)

    async def flush(self) -> None:
        while self.pending:
            batch, self.pending = self.pending[:_FLUSH_BATCH], self.pending[_FLUSH_BATCH:]
            await self.store.set_payloads(batch)

    async def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if ids and not self.dry_run:
            await self.store.set_payload(ids, payload)

    async def archive(self, ids: Sequence[str], reason: str, **extra: Any) -> None:
        await self.set_payload(ids, self.archive_payload(reason, **extra))
        self.archived.update(ids)

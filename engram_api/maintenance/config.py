"""Maintenance settings (``ENGRAM_MAINTENANCE__*``), a section of the process settings.

Similarity thresholds depend on the embedding model: MiniLM scores unrelated sentences near
0.1, e5-family models near 0.8. So the dedup threshold and the "related" similarity (the lower
edge of the conflict band and the task-log clustering threshold) come from a calibrated profile
per model, chosen by the longest model-id prefix; an explicit value overrides the profile.
``engram maintenance calibrate`` measures a profile for the configured embedder (see
docs/maintenance.md).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engram_contract.permissions import MemType


class SimilarityProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Cosine at or above which two memories of one scope and type may be the same memory:
    # they are when they also share ``lexical`` of their words and agree on numbers,
    # negation, antonyms, entities and dates (maintenance/sameness.py).
    dedup: float = Field(gt=0.0, le=1.0)
    # Cosine at or above which two memories are about the same thing: conflict candidates
    # are pairs at or above it, and task logs at or above it cluster for consolidation.
    related: float = Field(gt=0.0, le=1.0)
    # Word overlap (Dice, 0-1) a merge at the dedup cosine needs as well.
    lexical: float = Field(default=0.0, ge=0.0, le=1.0)
    # Word overlap at which a pair above ``related`` is a surface variant of one text
    # (case, punctuation, spacing), whatever the model makes of it.
    verbatim: float = Field(default=1.0, ge=0.0, le=1.0)
    # Cosine at or above which a clear contradiction is resolved without an LLM.
    resolve: float | None = Field(default=None, gt=0.0, le=1.0)
    # Where the numbers come from (shown in reports, so nobody mistakes a guess for a measure).
    source: str = Field(default="", max_length=200)

    @model_validator(mode="after")
    def _ordered(self) -> SimilarityProfile:
        if self.related >= self.dedup:
            raise ValueError("related must be below dedup")
        return self


# Measured with `engram maintenance calibrate` on the shipped pair set (docs/maintenance.md).
# Remote models cannot be measured offline: their entries are conservative published-range
# values until someone runs the calibration with a key; the report says which is which.
DEFAULT_PROFILES: Final[dict[str, SimilarityProfile]] = {
    "local/all-MiniLM-L6-v2": SimilarityProfile(
        dedup=0.87,
        related=0.5,
        lexical=0.35,
        verbatim=1.0,
        resolve=0.74,
        source="measured: engram maintenance calibrate --corpus tests/corpora/lifecycle.yaml",
    ),
    "hash/": SimilarityProfile(
        dedup=0.87, related=0.45, source="measured: engram maintenance calibrate"
    ),
    "openai/text-embedding-3": SimilarityProfile(
        dedup=0.95, related=0.45, source="unmeasured default: run engram maintenance calibrate"
    ),
    "gemini/": SimilarityProfile(
        dedup=0.97, related=0.75, source="unmeasured default: run engram maintenance calibrate"
    ),
}
# For a model with no profile: strict, so an uncalibrated model merges only near-identical text.
FALLBACK_PROFILE: Final = SimilarityProfile(
    dedup=0.98, related=0.85, source="fallback for an uncalibrated model"
)


class ConflictPolicy(StrEnum):
    # The newer memory wins (preferences change).
    update_latest = "update_latest"
    # Higher trust wins, then a user_direct source, then the newer one (facts).
    verify_source = "verify_source"
    # Both stay unless the judge is sure they contradict; then the newer one wins. Without
    # an LLM both stay and are flagged.
    keep_unless_clear = "keep_unless_clear"


class DedupSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # Overrides the model profile's dedup threshold.
    threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    # Neighbours asked for per memory; a larger cluster is finished by the next run.
    neighbours: int = Field(default=16, ge=1, le=256)
    # Types never deduplicated. task_log is always excluded, listed or not: two logs of
    # the same routine are two events, not one memory.
    exclude_types: list[MemType] = Field(default_factory=lambda: [MemType.task_log])


class ReextractSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # Raw memories of these types are rewritten. Task logs are left for consolidation and
    # knowledge is already a distillation.
    types: list[MemType] = Field(
        default_factory=lambda: [
            MemType.fact,
            MemType.preference,
            MemType.lesson,
            MemType.decision,
            MemType.procedure,
        ]
    )
    # The current UTC day plus this many UTC days before it: a run at 03:00 UTC still covers
    # yesterday. Memories already rewritten are marked, so overlapping windows do no double work.
    lookback_days: int = Field(default=1, ge=0, le=30)
    max_memories: int = Field(default=200, ge=1, le=100_000)
    max_statements: int = Field(default=8, ge=1, le=32)


class ConflictSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # The types checked and how each is resolved; a type not listed is never checked.
    policies: dict[MemType, ConflictPolicy] = Field(
        default_factory=lambda: {
            MemType.preference: ConflictPolicy.update_latest,
            MemType.fact: ConflictPolicy.verify_source,
            MemType.decision: ConflictPolicy.keep_unless_clear,
            MemType.lesson: ConflictPolicy.keep_unless_clear,
            MemType.knowledge: ConflictPolicy.keep_unless_clear,
            MemType.procedure: ConflictPolicy.update_latest,
        }
    )
    # Overrides of the profile's band [related, dedup).
    band_low: float | None = Field(default=None, gt=0.0, le=1.0)
    band_high: float | None = Field(default=None, gt=0.0, le=1.0)
    neighbours: int = Field(default=8, ge=1, le=128)
    # Pairs judged per run (the most similar first); the rest wait for the next run.
    max_pairs: int = Field(default=200, ge=1, le=100_000)


class ConsolidationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # Only task logs older than this are consolidated.
    min_age_days: float = Field(default=7.0, ge=0.0, le=3650.0)
    min_cluster_size: int = Field(default=3, ge=2, le=1000)
    # Also the neighbours asked for per task log: a cluster is a task log and its neighbours.
    max_cluster_size: int = Field(default=50, ge=2, le=500)
    # Overrides the profile's related similarity.
    similarity: float | None = Field(default=None, gt=0.0, le=1.0)
    max_clusters: int = Field(default=50, ge=1, le=10_000)
    # Text sent in one summarising call; a larger cluster is summarised in parts, then the
    # part summaries are summarised (map-reduce), so every member is read.
    chunk_chars: int = Field(default=12_000, ge=500, le=500_000)
    summary_max_chars: int = Field(default=2_000, ge=100, le=100_000)


class DecaySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # Types not listed never decay.
    half_life_days: dict[MemType, float] = Field(
        default_factory=lambda: {MemType.task_log: 30.0, MemType.procedure: 90.0}
    )
    # importance = exp(-ln2 / half_life * age / (1 + min(ln(1 + access_count), access_cap)))
    access_cap: float = Field(default=3.0, ge=0.0, le=100.0)
    threshold: float = Field(default=0.10, gt=0.0, lt=1.0)

    @field_validator("half_life_days")
    @classmethod
    def _positive(cls, v: dict[MemType, float]) -> dict[MemType, float]:
        for t, days in v.items():
            if days <= 0:
                raise ValueError(f"half-life of {t.value} must be > 0 days")
        return v


class BackupSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Where backups go; empty = beside the data dir, never inside it: <data_dir>-backups
    # (~/.local/share/engram-backups by default), so wiping the data dir keeps them.
    # Backup Jobs of the operator get their own volume here (ENGRAM_MAINTENANCE__BACKUP__DIR).
    dir: Path | None = None
    # Backups kept, locally and (server snapshots) on the Qdrant server.
    keep: int = Field(default=7, ge=1, le=1000)
    # Server snapshots left on the Qdrant server after a backup; None = `keep`. 0 streams each
    # one to the backup volume and deletes it from Qdrant, so Qdrant's snapshot volume needs
    # room for one snapshot, not `keep` of them (the chart sets 0).
    server_keep: int | None = Field(default=None, ge=0, le=1000)
    timeout_s: float = Field(default=600.0, gt=0, le=86_400)


class MaintenanceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dedup: DedupSettings = Field(default_factory=DedupSettings)
    reextract: ReextractSettings = Field(default_factory=ReextractSettings)
    conflicts: ConflictSettings = Field(default_factory=ConflictSettings)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    decay: DecaySettings = Field(default_factory=DecaySettings)
    backup: BackupSettings = Field(default_factory=BackupSettings)
    # Per embedding-model-id prefix; merged over the shipped defaults.
    profiles: dict[str, SimilarityProfile] = Field(default_factory=dict)
    # Points scrolled and queried per batch.
    page_size: int = Field(default=256, ge=1, le=4096)
    # A server-mode lock not renewed for this long is taken over (the holder died).
    lock_ttl_s: float = Field(default=1800.0, ge=30.0, le=86_400.0)
    # Report files kept under <data_dir>/reports.
    reports_keep: int = Field(default=200, ge=1, le=100_000)

    def profile_for(self, model_id: str) -> SimilarityProfile:
        """The profile whose key is the longest prefix of ``model_id``."""
        merged = {**DEFAULT_PROFILES, **self.profiles}
        best = max((k for k in merged if model_id.startswith(k)), key=len, default=None)
        return merged[best] if best is not None else FALLBACK_PROFILE

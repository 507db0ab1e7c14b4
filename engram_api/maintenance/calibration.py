"""Measure similarity thresholds for an embedding model on a fixed set of sentence pairs.

Three kinds of pairs, written like the memories agents store:
- duplicates: the same statement reworded (these should merge);
- near misses: the same subject with a different or opposite value ("prefers dark mode" /
  "prefers light mode"); merging them would lose a memory, so the dedup threshold must sit
  above all of them. They are what the conflict band is for;
- unrelated: different subjects.

The dedup threshold is the lowest value above every near miss and unrelated pair (plus a
margin); the related similarity sits above the unrelated pairs and below most near misses.
The result also says how many duplicates the threshold catches, so a model whose duplicates
and near misses overlap is visible as low recall rather than as silent data loss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from engram_api.embeddings.base import Embedder

DUPLICATES: Final[tuple[tuple[str, str], ...]] = (
    ("The user prefers dark mode in every editor.", "User prefers dark mode in all editors."),
    ("Deploys to production happen on Tuesdays.", "Production deploys happen every Tuesday."),
    ("The staging database is PostgreSQL 15.", "Staging runs on PostgreSQL 15."),
    ("Alice is the owner of the billing service.", "The billing service is owned by Alice."),
    ("Use pnpm, not npm, in the web repository.", "In the web repo, use pnpm instead of npm."),
    ("The user's time zone is Europe/Berlin.", "User is in the Europe/Berlin time zone."),
    (
        "CI must pass before a pull request is merged.",
        "Pull requests are merged only after CI passes.",
    ),
    (
        "The team decided to use Kafka for event streaming.",
        "Decision: Kafka is the event streaming platform.",
    ),
    (
        "The user likes short answers without preamble.",
        "User prefers brief answers with no preamble.",
    ),
    (
        "Run database migrations before starting the API server.",
        "Before starting the API server, run the database migrations.",
    ),
    ("The API rate limit is 100 requests per minute.", "API calls are limited to 100 per minute."),
    ("Bob is on vacation until March 3.", "Bob is away on vacation until the 3rd of March."),
    ("Logs are kept for 30 days.", "Log retention is 30 days."),
    ("The frontend is written in TypeScript with React.", "Frontend: React with TypeScript."),
    ("Never push directly to the main branch.", "Direct pushes to main are not allowed."),
    (
        "The user wants code comments in English.",
        "User wants all code comments written in English.",
    ),
    ("Backups run every night at 02:00 UTC.", "Nightly backups run at 02:00 UTC."),
    ("The mobile app supports iOS 16 and later.", "The mobile app requires iOS 16 or newer."),
    ("Carol approves all infrastructure changes.", "Infrastructure changes need Carol's approval."),
    ("The user prefers metric units.", "User prefers the metric system for units."),
    (
        "The search service caches results for five minutes.",
        "Search results are cached for 5 minutes.",
    ),
    ("Use UTC timestamps in all log lines.", "All log lines should use UTC timestamps."),
    ("The project's license is Apache 2.0.", "This project is licensed under Apache-2.0."),
    (
        "Lesson: restart the worker after changing its config.",
        "After a config change, the worker must be restarted.",
    ),
    ("The user is vegetarian.", "User follows a vegetarian diet."),
    (
        "Tests run with pytest and asyncio mode auto.",
        "The test suite uses pytest with asyncio_mode=auto.",
    ),
    ("Dave leads the data platform team.", "The data platform team is led by Dave."),
    (
        "The invoice service retries failed payments three times.",
        "Failed payments are retried 3 times by the invoice service.",
    ),
    (
        "The user wants weekly summaries on Friday afternoons.",
        "User would like a weekly summary every Friday afternoon.",
    ),
    (
        "Kubernetes clusters are upgraded once per quarter.",
        "The Kubernetes clusters get upgraded quarterly.",
    ),
)

NEAR_MISSES: Final[tuple[tuple[str, str], ...]] = (
    ("The user prefers dark mode in every editor.", "The user prefers light mode in every editor."),
    ("Deploys to production happen on Tuesdays.", "Deploys to production happen on Thursdays."),
    ("The staging database is PostgreSQL 15.", "The staging database is MySQL 8."),
    ("Alice is the owner of the billing service.", "Bob is the owner of the billing service."),
    ("Use pnpm, not npm, in the web repository.", "Use npm, not pnpm, in the web repository."),
    ("The user's time zone is Europe/Berlin.", "The user's time zone is America/New_York."),
    (
        "The team decided to use Kafka for event streaming.",
        "The team decided to use RabbitMQ for event streaming.",
    ),
    (
        "The user likes short answers without preamble.",
        "The user likes long, detailed answers with background.",
    ),
    (
        "The API rate limit is 100 requests per minute.",
        "The API rate limit is 1000 requests per minute.",
    ),
    ("Bob is on vacation until March 3.", "Bob is on vacation until June 12."),
    ("Logs are kept for 30 days.", "Logs are kept for 365 days."),
    (
        "The frontend is written in TypeScript with React.",
        "The frontend is written in Dart with Flutter.",
    ),
    ("Never push directly to the main branch.", "Always push directly to the main branch."),
    ("The user wants code comments in English.", "The user wants code comments in German."),
    ("Backups run every night at 02:00 UTC.", "Backups run every Sunday at 14:00 UTC."),
    ("The mobile app supports iOS 16 and later.", "The mobile app supports Android 12 and later."),
    ("Carol approves all infrastructure changes.", "Carol approves all marketing budget changes."),
    ("The user prefers metric units.", "The user prefers imperial units."),
    (
        "The search service caches results for five minutes.",
        "The search service never caches results.",
    ),
    ("The project's license is Apache 2.0.", "The project's license is GPL 3.0."),
    ("The user is vegetarian.", "The user is allergic to peanuts."),
    ("Dave leads the data platform team.", "Dave leads the mobile team."),
    (
        "The invoice service retries failed payments three times.",
        "The invoice service never retries failed payments.",
    ),
    (
        "Kubernetes clusters are upgraded once per quarter.",
        "Kubernetes clusters are upgraded every week.",
    ),
    ("The user prefers tabs for indentation.", "The user prefers spaces for indentation."),
    ("Production runs in the eu-west-1 region.", "Production runs in the us-east-2 region."),
    ("The release branch is cut every two weeks.", "The release branch is cut every month."),
    ("Emails to customers are sent in French.", "Emails to customers are sent in Spanish."),
    ("The on-call rotation changes on Mondays.", "The on-call rotation changes on Fridays."),
    ("Use Python 3.11 for new services.", "Use Go 1.22 for new services."),
)

UNRELATED: Final[tuple[tuple[str, str], ...]] = (
    ("The user prefers dark mode in every editor.", "Backups run every night at 02:00 UTC."),
    ("Deploys to production happen on Tuesdays.", "The user is vegetarian."),
    ("The staging database is PostgreSQL 15.", "Bob is on vacation until March 3."),
    ("Alice is the owner of the billing service.", "The user prefers metric units."),
    (
        "Use pnpm, not npm, in the web repository.",
        "Kubernetes clusters are upgraded once per quarter.",
    ),
    ("The user's time zone is Europe/Berlin.", "Tests run with pytest and asyncio mode auto."),
    (
        "CI must pass before a pull request is merged.",
        "The user wants weekly summaries on Friday afternoons.",
    ),
    (
        "The team decided to use Kafka for event streaming.",
        "The user likes short answers without preamble.",
    ),
    (
        "Run database migrations before starting the API server.",
        "Dave leads the data platform team.",
    ),
    ("The API rate limit is 100 requests per minute.", "The project's license is Apache 2.0."),
    ("Logs are kept for 30 days.", "The frontend is written in TypeScript with React."),
    ("Never push directly to the main branch.", "The user prefers metric units."),
    ("The mobile app supports iOS 16 and later.", "Carol approves all infrastructure changes."),
    ("The search service caches results for five minutes.", "The user is vegetarian."),
    (
        "Lesson: restart the worker after changing its config.",
        "Emails to customers are sent in French.",
    ),
    (
        "The invoice service retries failed payments three times.",
        "The user prefers tabs for indentation.",
    ),
    ("Production runs in the eu-west-1 region.", "The user wants code comments in English."),
    ("The release branch is cut every two weeks.", "Alice is the owner of the billing service."),
    ("The on-call rotation changes on Mondays.", "The staging database is PostgreSQL 15."),
    ("Use Python 3.11 for new services.", "Bob is on vacation until March 3."),
    (
        "Fixed the flaky login test by waiting for the redirect.",
        "The user prefers dark mode in every editor.",
    ),
    (
        "Renewed the TLS certificate for api.example.com.",
        "The team decided to use Kafka for event streaming.",
    ),
    (
        "Migrated the users table to the new schema.",
        "The user likes short answers without preamble.",
    ),
    ("Investigated high memory use in the search pods.", "Never push directly to the main branch."),
    ("Wrote release notes for version 2.4.", "The user's time zone is Europe/Berlin."),
    ("Reviewed the pull request for the payments refactor.", "Logs are kept for 30 days."),
    ("Rotated the on-call schedule for the holidays.", "The mobile app supports iOS 16 and later."),
    ("Cleaned up unused Docker images on the build host.", "The user prefers metric units."),
    ("Benchmarked the new vector index settings.", "Dave leads the data platform team."),
    ("Answered a customer question about invoices.", "Use UTC timestamps in all log lines."),
)

_MARGIN: Final = 0.003


@dataclass(frozen=True)
class Stats:
    n: int
    min: float
    p05: float
    median: float
    p95: float
    max: float

    @staticmethod
    def of(scores: Sequence[float]) -> Stats:
        a = np.asarray(scores, dtype=np.float64)
        return Stats(
            n=len(a),
            min=float(a.min()),
            p05=float(np.percentile(a, 5)),
            median=float(np.median(a)),
            p95=float(np.percentile(a, 95)),
            max=float(a.max()),
        )


@dataclass(frozen=True)
class Calibration:
    model_id: str
    duplicates: Stats
    near_misses: Stats
    unrelated: Stats
    dedup: float
    related: float
    # Share of duplicate pairs at or above the dedup threshold.
    duplicate_recall: float
    # Share of near-miss pairs inside the conflict band [related, dedup).
    near_miss_in_band: float

    def to_dict(self) -> dict[str, object]:
        def st(s: Stats) -> dict[str, float]:
            return {
                "n": s.n,
                "min": round(s.min, 4),
                "p05": round(s.p05, 4),
                "median": round(s.median, 4),
                "p95": round(s.p95, 4),
                "max": round(s.max, 4),
            }

        return {
            "model_id": self.model_id,
            "duplicates": st(self.duplicates),
            "near_misses": st(self.near_misses),
            "unrelated": st(self.unrelated),
            "recommended": {"dedup": self.dedup, "related": self.related},
            "duplicate_recall": round(self.duplicate_recall, 3),
            "near_miss_in_band": round(self.near_miss_in_band, 3),
        }


def _ceil2(x: float) -> float:
    return math.ceil(x * 100 - 1e-9) / 100


def _floor2(x: float) -> float:
    return math.floor(x * 100 + 1e-9) / 100


async def _scores(embedder: Embedder, pairs: Sequence[tuple[str, str]]) -> list[float]:
    left = await embedder.embed_documents([a for a, _ in pairs])
    right = await embedder.embed_documents([b for _, b in pairs])
    return [float(np.dot(a, b)) for a, b in zip(left, right, strict=True)]


def recommend(
    model_id: str, dup: list[float], near: list[float], unrel: list[float]
) -> Calibration:
    d, n, u = Stats.of(dup), Stats.of(near), Stats.of(unrel)
    # Above every near miss: an embedding cannot tell "use npm, not pnpm" from its reverse,
    # so merging stays with near-verbatim copies and the band below goes to the LLM judge.
    dedup = min(0.99, _ceil2(max(n.max, u.max) + _MARGIN))
    # Low enough to put most near misses in the conflict band, above every unrelated pair.
    related = max(_floor2(n.p05), _ceil2(u.max + 2 * _MARGIN))
    related = min(related, round(dedup - 0.05, 2))
    recall = sum(s >= dedup for s in dup) / len(dup)
    in_band = sum(related <= s < dedup for s in near) / len(near)
    return Calibration(model_id, d, n, u, dedup, related, recall, in_band)


async def calibrate(embedder: Embedder) -> Calibration:
    """Embed the shipped pairs with ``embedder`` and recommend its thresholds."""
    return recommend(
        embedder.model_id,
        await _scores(embedder, DUPLICATES),
        await _scores(embedder, NEAR_MISSES),
        await _scores(embedder, UNRELATED),
    )


# ------------------------------------------------------------------ on the labelled corpus
@dataclass(frozen=True)
class CorpusCalibration:
    """Thresholds for :func:`sameness.judge` fitted on a labelled corpus (per model)."""

    model_id: str
    pairs: int
    dedup: float
    related: float
    lexical: float
    verbatim: float
    resolve: float
    duplicate_recall: float
    contradictions_resolvable: float

    def to_dict(self) -> dict[str, object]:
        return {
            "model_id": self.model_id,
            "pairs": self.pairs,
            "recommended": {
                "dedup": self.dedup,
                "related": self.related,
                "lexical": self.lexical,
                "verbatim": self.verbatim,
                "resolve": self.resolve,
            },
            "duplicate_recall": round(self.duplicate_recall, 3),
            "contradictions_resolvable": round(self.contradictions_resolvable, 3),
        }


def fit(model_id: str, rows: Sequence[tuple[str, float, float, bool, bool]]) -> CorpusCalibration:
    """``rows``: (label, cosine, word overlap, the texts differ, the difference is clear).

    The merge rule is the one judge() applies: agree, and cosine >= dedup with overlap >=
    lexical, or overlap >= verbatim above related. Chosen: the highest duplicate recall with
    no distinct pair or contradiction merged, the strictest thresholds on a tie.
    """
    contra = [c for label, c, _, _, _ in rows if label == "contradiction"]
    related = max(0.3, math.floor((min(contra) - 0.05) * 20 + 1e-9) / 20) if contra else 0.5
    n_dup = max(sum(1 for r in rows if r[0] == "duplicate"), 1)
    best: tuple[float, float, float, float] | None = None
    for d in range(80, 100):
        dedup = d / 100
        for lx in range(0, 21):
            lexical = lx / 20
            for vb in (1.0, 0.95, 0.9, 0.85, 0.8):
                merged = [
                    label
                    for label, c, o, differ, _ in rows
                    if not differ and c >= related and ((c >= dedup and o >= lexical) or o >= vb)
                ]
                if any(label != "duplicate" for label in merged):
                    continue
                recall = len(merged) / n_dup
                key = (recall, dedup, lexical, vb)
                if best is None or key[0] > best[0] + 1e-12:
                    best = key
    recall, dedup, lexical, verbatim = best or (0.0, 0.99, 1.0, 1.0)
    clear_distinct = [c for label, c, _, _, clear in rows if label == "distinct" and clear]
    resolve = _ceil2(max(clear_distinct) + _MARGIN) if clear_distinct else related
    resolvable = sum(
        1 for label, c, _, _, clear in rows if label == "contradiction" and clear and c >= resolve
    ) / max(len(contra), 1)
    return CorpusCalibration(
        model_id, len(rows), dedup, related, lexical, verbatim, resolve, recall, resolvable
    )


async def calibrate_corpus(
    embedder: Embedder, pairs: Sequence[tuple[str, str, str]]
) -> CorpusCalibration:
    """``pairs``: (label, text a, text b). Embeds both sides and fits :func:`fit`."""
    from .statements import compare, overlap

    cos = await _scores(embedder, [(a, b) for _, a, b in pairs])
    rows = []
    for (label, a, b), c in zip(pairs, cos, strict=True):
        diff = compare(a, b)
        rows.append((label, c, overlap(a, b), diff is not None, bool(diff and diff.clear)))
    return fit(embedder.model_id, rows)

"""When two memories of one scope and type are the same memory, in conflict, or only related.

One function decides for dedup, conflicts, the calibration command and bench/quality.py:
- ``conflict``: close in meaning (cosine >= related) but they disagree on a number, version,
  date, negation, antonym or named entity (:func:`statements.compare`). Never merged; the
  conflicts step resolves it (offline when the difference is ``clear`` and the cosine is at
  least the profile's ``resolve``) or reports it.
- ``duplicate``: they agree, and either the cosine is >= dedup with at least ``lexical`` of
  their words shared, or they share ``verbatim`` of their words (a surface variant: case,
  punctuation, spacing) at a cosine >= related.
- ``related``: about the same thing, nothing to do; ``distinct``: below related.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .config import SimilarityProfile
from .statements import Difference, compare, overlap

Kind = Literal["duplicate", "conflict", "related", "distinct"]


@dataclass(frozen=True)
class Judgement:
    kind: Kind
    cosine: float
    overlap: float
    difference: Difference | None = None

    @property
    def resolvable(self) -> bool:
        """A conflict clear enough for a type policy to settle without an LLM."""
        return self.kind == "conflict" and self.difference is not None and self.difference.clear

    @property
    def reason(self) -> str:
        if self.difference is not None:
            return f"{self.difference.kind}: {self.difference.detail}"
        return f"cosine {self.cosine:.3f}, word overlap {self.overlap:.2f}"


def judge(
    cosine: float, a: str, b: str, profile: SimilarityProfile, *, dedup: float | None = None
) -> Judgement:
    threshold = dedup if dedup is not None else profile.dedup
    if cosine < profile.related:
        return Judgement("distinct", cosine, 0.0)
    words = overlap(a, b)
    diff = compare(a, b)
    if diff is not None:
        return Judgement("conflict", cosine, words, diff)
    if (cosine >= threshold and words >= profile.lexical) or words >= profile.verbatim:
        return Judgement("duplicate", cosine, words)
    return Judgement("related", cosine, words)


def resolvable_offline(j: Judgement, profile: SimilarityProfile, dedup: float) -> bool:
    floor = profile.resolve if profile.resolve is not None else dedup
    return j.resolvable and j.cosine >= floor

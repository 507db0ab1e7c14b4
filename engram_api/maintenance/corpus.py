"""The labelled lifecycle corpus (tests/corpora/lifecycle.yaml) and what maintenance did to it.

Each pair is stored in a scope of its own, the weekly maintenance runs without an LLM, and
every pair's outcome is read back from the store: merged (one archived as ``duplicate``),
resolved (one archived ``superseded``: right or wrong survivor), flagged (both kept with
``conflict_with``) or kept. bench/quality.py prints the figures; tests assert them on a slice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import yaml

from engram_api.memory.model import utc_now
from engram_api.runtime import Engine

Label = Literal["duplicate", "contradiction", "distinct"]


@dataclass(frozen=True)
class Side:
    content: str
    trust: str = "medium"
    source: str = "agent_output"
    age_days: float = 10.0


@dataclass(frozen=True)
class LabelledPair:
    id: str
    lang: str
    mem_type: str
    scope: str
    label: Label
    kind: str
    a: Side
    b: Side
    # For contradictions: "a", "b" or "both" (the type keeps both and flags them).
    survivor: str = ""


def load(path: Path) -> list[LabelledPair]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        LabelledPair(
            id=p["id"],
            lang=p["lang"],
            mem_type=p["mem_type"],
            scope=p["scope"],
            label=p["label"],
            kind=p["kind"],
            a=Side(**p["a"]),
            b=Side(**p["b"]),
            survivor=p.get("survivor", ""),
        )
        for p in raw["pairs"]
    ]


Outcome = Literal["merged", "resolved_right", "resolved_wrong", "flagged", "kept", "lost"]


@dataclass
class Results:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    pairs: dict[str, LabelledPair] = field(default_factory=dict)

    def of(self, label: Label) -> list[tuple[LabelledPair, Outcome]]:
        return [(p, self.outcomes[i]) for i, p in self.pairs.items() if p.label == label]

    def figures(self) -> dict[str, Any]:
        dups = self.of("duplicate")
        contra = self.of("contradiction")
        distinct = self.of("distinct")
        right = sum(
            1
            for p, o in contra
            if o == "resolved_right" or (p.survivor == "both" and o == "flagged")
        )
        return {
            "pairs": len(self.pairs),
            "duplicates": len(dups),
            "duplicate_recall": round(sum(o == "merged" for _, o in dups) / max(len(dups), 1), 3),
            "distinct": len(distinct),
            "distinct_merged": sum(o == "merged" for _, o in distinct),
            "distinct_archived": sum(o not in ("kept", "flagged") for _, o in distinct),
            "contradictions": len(contra),
            "contradictions_merged": sum(o == "merged" for _, o in contra),
            "contradictions_resolved_right": right,
            "contradictions_resolved_right_share": round(right / max(len(contra), 1), 3),
            "contradictions_wrong_direction": sum(
                1
                for p, o in contra
                if o == "resolved_wrong" or (p.survivor == "both" and o == "resolved_right")
            ),
        }


def scope_of(i: int) -> str:
    return f"group:corpus-{i}"


async def store_pairs(engine: Engine, pairs: Sequence[LabelledPair]) -> dict[str, tuple[str, str]]:
    """Each pair in its own scope (so pairs never meet); ids by pair id."""
    now = utc_now()
    ids: dict[str, tuple[str, str]] = {}
    for i, p in enumerate(pairs):
        got = []
        for side in (p.a, p.b):
            out = await engine.service.add(
                agent="main",
                content=side.content,
                scope=scope_of(i),
                mem_type=p.mem_type,
                trust=side.trust,
                source=side.source,
                created_at=now - timedelta(days=side.age_days),
            )
            got.append(str(out["id"]))
        ids[p.id] = (got[0], got[1])
    return ids


async def outcomes(
    engine: Engine, pairs: Sequence[LabelledPair], ids: dict[str, tuple[str, str]]
) -> Results:
    res = Results()
    for p in pairs:
        a, b = ids[p.id]
        res.pairs[p.id] = p
        if a == b:  # the same text twice after normalisation: one memory, merged at add
            res.outcomes[p.id] = "merged"
            continue
        got = {x.id: x.payload for x in await engine.store.retrieve([a, b])}
        pa, pb = got[a], got[b]
        archived = [x for x, px in ((a, pa), (b, pb)) if px.get("archived")]
        if not archived:
            flagged = pa.get("conflict_with") or pb.get("conflict_with")
            res.outcomes[p.id] = "flagged" if flagged else "kept"
        elif len(archived) == 2:
            res.outcomes[p.id] = "lost"
        else:
            reason = str(got[archived[0]].get("archived_reason", ""))
            if reason == "duplicate":
                res.outcomes[p.id] = "merged"
            else:
                survivor = "b" if archived[0] == a else "a"
                res.outcomes[p.id] = (
                    "resolved_right" if survivor == p.survivor else "resolved_wrong"
                )
    return res

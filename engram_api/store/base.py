"""The store contract: what the memory engine needs from a vector database.

Filters are expressed in our own small vocabulary (:class:`Match`) and translated by each
implementation, so the engine never depends on a client library's types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

import numpy as np
import numpy.typing as npt

DENSE: Final = "dense"
SPARSE: Final = "bm25"
# Reciprocal rank fusion constant. Measured on LoCoMo with the default MiniLM model (see
# docs/benchmarks.md): k=60, the textbook value, gives R@10 0.749 on observations and 0.570 on
# dialogue turns; k=5 gives 0.784 and 0.656, because a small k lets a strong first rank in
# either list count, where k=60 flattens ranks and lets middling items of both lists win.
RRF_K: Final = 5


@dataclass(frozen=True)
class Fusion:
    """How hybrid search merges the dense and BM25 lists: RRF with constant ``k`` (the dense
    list's ranks weighted ``dense_weight``, BM25's 1), or Qdrant's distribution-based score
    fusion (``dbsf``: each list's scores normalised by their mean and 3 standard deviations,
    then summed). Compared in bench/retrieval.py --fusion (docs/benchmarks.md)."""

    kind: Literal["rrf", "dbsf"] = "rrf"
    k: int = RRF_K
    dense_weight: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> Fusion:
        """``rrf:K``, ``rrf:K:W`` (dense weight W) or ``dbsf``."""
        if spec == "dbsf":
            return cls("dbsf")
        name, _, rest = spec.partition(":")
        k, _, weight = rest.partition(":")
        try:
            fusion = cls("rrf", int(k), float(weight or 1.0))
        except ValueError:
            fusion = cls("rrf", 0)
        if name != "rrf" or fusion.k < 1 or not 0 < fusion.dense_weight <= 100:
            raise ValueError(f"fusion {spec!r}: use rrf:K, rrf:K:W (K >= 1, 0 < W <= 100) or dbsf")
        return fusion

    @property
    def weights(self) -> list[float] | None:
        """RRF weights of (dense, BM25); None when equal."""
        return None if self.dense_weight == 1.0 else [self.dense_weight, 1.0]

    def __str__(self) -> str:
        if self.kind == "dbsf":
            return "dbsf"
        return f"rrf:{self.k}" + ("" if self.dense_weight == 1.0 else f":{self.dense_weight:g}")


# Hybrid fusion per embedding model, chosen on corpora not tuned on (docs/benchmarks.md,
# "Multilingual default"): with multilingual-e5-small, DBSF beat RRF k=5 on LoCoMo's held-out
# half (R@10 0.773 / 0.631 against 0.762 / 0.623) and on the bilingual corpus (top-1 en 0.520
# against 0.467, mixed 0.873 against 0.745, zh equal); with MiniLM, RRF k=5 stays ahead (0.784 /
# 0.628 against DBSF's 0.774 / 0.621).
FUSION_BY_MODEL: Final = {"local/multilingual-e5-small-q4": Fusion("dbsf")}


def fusion_for(model_id: str) -> Fusion:
    return FUSION_BY_MODEL.get(model_id, Fusion())


def prefetch_depth(limit: int) -> int:
    """How many candidates each of the dense and the BM25 lists brings to the fusion."""
    # LoCoMo R@10 at limit 10 (observations / turns): 0.782 / 0.655 with 5x (min 50), 0.781 /
    # 0.655 with 3x (min 30), 0.780 / 0.654 with 2x; with k=5 deep ranks barely count. 3x cuts
    # the embedded store's hybrid search at 100k memories from ~3 to ~2 ms (10% filter).
    return max(limit * 3, 30)


# Payload fields with an index (keyword unless noted).
KEYWORD_INDEXES: Final = (
    "scope",
    "scope_kind",
    "live_scope",
    "live_scope_kind",
    "mem_type",
    "trust",
    "agent",
    "content_hash",
    "write_id",
    "embedding_model",
)
INTEGER_INDEXES: Final = ("archived",)
FLOAT_INDEXES: Final = ("created_at_epoch",)

SearchMode = Literal["dense", "sparse", "hybrid"]

DenseVector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class SparseVec:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class Match:
    """A conjunction of conditions; ``None`` means "any".

    ``scopes`` and ``scope_kinds`` are OR-ed with each other: a point matches when its scope is
    listed, or its scope kind is listed (that is how ``group:*`` reads every group). A kind
    stands for the scopes *with an id* of that kind, as the pattern ``<kind>:*`` does: the bare
    ``dm`` bucket shares the kind ``dm`` with ``dm:<id>`` but only an exact ``dm`` selects it.
    """

    scopes: frozenset[str] | None = None
    scope_kinds: frozenset[str] | None = None
    mem_types: frozenset[str] | None = None
    trusts: frozenset[str] | None = None
    archived: bool | None = False
    agent: str | None = None
    content_hash: str | None = None
    created_before_epoch: float | None = None
    created_after_epoch: float | None = None
    ids: frozenset[str] | None = None
    # Memories embedded by these models (payload ``embedding_model``).
    embedding_models: frozenset[str] | None = None


# Derived fields: the scope (and its kind) while the memory is active, "" once archived. The
# hot path (active memories of some scopes) then filters on one indexed keyword instead of
# scope AND archived, which qdrant-edge plans 2-4x slower. Stores keep them in step with
# ``archived`` on every write, so nothing above the store ever sets them.
LIVE_FIELDS: Final = ("live_scope", "live_scope_kind")


def with_live_fields(payload: dict[str, Any]) -> dict[str, Any]:
    active = not payload.get("archived")
    scope = str(payload.get("scope", ""))
    return {
        **payload,
        "live_scope": scope if active else "",
        "live_scope_kind": scope.split(":", 1)[0] if active and scope else "",
    }


def live_updates(
    updates: Sequence[tuple[Sequence[str], dict[str, Any]]], scopes: dict[str, str]
) -> list[tuple[list[str], dict[str, Any]]]:
    """Rewrite payload updates that touch ``archived`` so the live fields follow, per point."""
    out: list[tuple[list[str], dict[str, Any]]] = []
    for ids, payload in updates:
        if "archived" not in payload:
            out.append((list(ids), payload))
            continue
        for pid in ids:
            if pid in scopes:
                live = with_live_fields({"scope": scopes[pid], **payload})
                out.append(([pid], {**payload, **{k: live[k] for k in LIVE_FIELDS}}))
    return out


def ids_needing_scope(updates: Sequence[tuple[Sequence[str], dict[str, Any]]]) -> list[str]:
    return sorted({pid for ids, payload in updates if "archived" in payload for pid in ids})


def uses_live_fields(m: Match) -> bool:
    """Whether a filter can use the derived fields (active memories of chosen scopes)."""
    return m.archived is False and (m.scopes is not None or m.scope_kinds is not None)


NOTHING: Final = "\x00none"  # a keyword no point holds: an empty selector reads nothing


@dataclass(frozen=True)
class Cond:
    """One condition in store-neutral form; each store translates it to its client's types."""

    key: str
    # Keyword or integer values, any of which matches (one value: an exact match).
    values: tuple[str, ...] | tuple[int, ...] | None = None
    lt: float | None = None
    gte: float | None = None
    # Point ids (key is ignored).
    ids: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Unless:
    """``cond`` holds and ``unless`` does not."""

    cond: Cond
    unless: Cond


# Scopes whose kind field equals a kind that also has ``<kind>:<id>`` scopes, without an id:
# a kind filter must leave them out (``dm:*`` does not cover the bare ``dm`` bucket).
BARE_KIND_SCOPES: Final = ("dm",)

# A conjunction; an inner tuple is a disjunction (scope OR scope kind).
Conditions = list[Cond | tuple[Cond | Unless, ...]]


def _kind_cond(kind_key: str, scope_key: str, kinds: frozenset[str]) -> Cond | Unless:
    cond = Cond(kind_key, values=tuple(sorted(kinds)))
    bare = tuple(s for s in BARE_KIND_SCOPES if s in kinds)
    return Unless(cond, Cond(scope_key, values=bare)) if bare else cond


def conditions(m: Match) -> Conditions:
    """The filter for ``m``: the single place that decides field names and sentinels."""
    out: Conditions = []
    live = uses_live_fields(m)
    scope_key, kind_key = ("live_scope", "live_scope_kind") if live else ("scope", "scope_kind")
    if m.scopes is not None or m.scope_kinds is not None:
        either: list[Cond | Unless] = []
        if m.scopes:
            either.append(Cond(scope_key, values=tuple(sorted(m.scopes))))
        if m.scope_kinds:
            either.append(_kind_cond(kind_key, scope_key, m.scope_kinds))
        out.append(tuple(either) if either else (Cond("scope", values=(NOTHING,)),))
    for key, chosen in (("mem_type", m.mem_types), ("trust", m.trusts)):
        if chosen is not None:
            out.append(Cond(key, values=tuple(sorted(chosen)) or (NOTHING,)))
    if m.archived is not None and not live:
        out.append(Cond("archived", values=(1 if m.archived else 0,)))
    if m.agent is not None:
        out.append(Cond("agent", values=(m.agent,)))
    if m.content_hash is not None:
        out.append(Cond("content_hash", values=(m.content_hash,)))
    if m.created_before_epoch is not None or m.created_after_epoch is not None:
        out.append(Cond("created_at_epoch", lt=m.created_before_epoch, gte=m.created_after_epoch))
    if m.ids is not None:
        out.append(Cond("", ids=tuple(sorted(m.ids))))
    if m.embedding_models is not None:
        out.append(Cond("embedding_model", values=tuple(sorted(m.embedding_models)) or (NOTHING,)))
    return out


@dataclass
class PointWrite:
    id: str
    dense: DenseVector
    sparse: SparseVec | None
    payload: dict[str, Any]


@dataclass
class StoredPoint:
    id: str
    payload: dict[str, Any]
    score: float = 0.0
    dense: DenseVector | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexStatus:
    """A store's own search index, where it builds one (the embedded store)."""

    indexed_points: int
    unindexed_points: int
    building: bool


class StoreError(RuntimeError):
    """The store could not do what was asked (down, timed out, refused)."""


class SchemaMismatch(RuntimeError):
    """The stored collection was built for another vector dimension."""


class MemoryStore(Protocol):
    @property
    def kind(self) -> str: ...

    async def open(self, dimension: int | None) -> None:
        """Create the collection and indexes if missing; refuse a dimension mismatch.

        ``None`` opens an existing collection whatever its dimension (StoreError if missing).
        """
        ...

    async def close(self) -> None: ...

    async def healthy(self) -> bool: ...

    def index_status(self) -> IndexStatus | None:
        """None where the index is not the store's to build (a Qdrant server builds its own)."""
        ...

    async def upsert(self, points: Sequence[PointWrite]) -> None: ...

    async def retrieve(
        self, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[StoredPoint]: ...

    async def query(
        self,
        *,
        dense: DenseVector | None,
        sparse: SparseVec | None,
        match: Match,
        limit: int,
        mode: SearchMode,
    ) -> list[StoredPoint]: ...

    async def query_batch(
        self,
        vectors: Sequence[DenseVector],
        *,
        match: Match,
        limit: int,
        score_threshold: float,
        with_payload: bool = True,
    ) -> list[list[StoredPoint]]:
        """Dense nearest neighbours for many vectors at once (maintenance).

        ``with_payload=False`` returns ids and scores only (empty payloads): reading and
        converting every hit's payload costs more than the search when hits are many.
        """
        ...

    async def scroll(
        self, match: Match, *, limit: int, offset: str | None = None, with_vectors: bool = False
    ) -> tuple[list[StoredPoint], str | None]:
        """Points in id order; the returned offset continues the walk (None at the end)."""
        ...

    async def count(self, match: Match) -> int: ...

    async def facet(self, key: str, match: Match, *, limit: int = 1000) -> dict[str, int]: ...

    async def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None: ...

    async def set_payloads(self, updates: Sequence[tuple[Sequence[str], dict[str, Any]]]) -> None:
        """Many ``set_payload`` calls applied in order as one write (maintenance batches)."""
        ...

    async def delete(self, ids: Sequence[str]) -> None: ...

    async def set_vectors(self, vectors: Sequence[tuple[str, DenseVector]]) -> None:
        """Replace the dense vectors of existing points; payloads and BM25 are untouched."""
        ...

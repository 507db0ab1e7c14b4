"""Embedded store: qdrant-edge (Qdrant's engine in-process) in the data dir.

qdrant-edge is synchronous; every call goes through one worker thread, which keeps the event
loop free and serialises access to the shard (its thread-safety is not documented).

There is no HNSW graph: qdrant-edge builds one only in `optimize()`, which blocks the shard for
20-80 s at 100k points. Search instead scans a 1-bit copy of every candidate vector (scored
against an 8-bit query) and rescores the best `OVERSAMPLING` x limit with the full vectors, so
the returned scores are exact cosines. On LoCoMo's MiniLM vectors that keeps 99% of the exact
top 10 (99.8% of the top 50) at 40-75% of the cost of an exact scan at 100k (docs/benchmarks.md).
`exact=True` scans full-precision vectors instead.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import numpy as np
import qdrant_edge as qe

from engram_api.errors import EngramError, StoreLocked

from .base import (
    DENSE,
    FLOAT_INDEXES,
    INTEGER_INDEXES,
    KEYWORD_INDEXES,
    RRF_K,
    SPARSE,
    Cond,
    DenseVector,
    Match,
    PointWrite,
    SchemaMismatch,
    SearchMode,
    SparseVec,
    StoredPoint,
    StoreError,
    conditions,
    ids_needing_scope,
    live_updates,
    prefetch_depth,
    with_live_fields,
)

if TYPE_CHECKING:
    from qdrant_edge import PointId

T = TypeVar("T")

# Measured on LoCoMo with MiniLM: overlap with the exact top 10 is 0.76 at 1x, 0.94 at 2x and
# 0.99 at 4x oversampling (candidates rescored with the full vectors).
OVERSAMPLING: Final = 4.0


def _edge_cond(c: Cond) -> Any:
    if c.ids is not None:
        # qdrant-edge wants a non-empty id set; the nil UUID is never a memory's id.
        return qe.HasIdCondition(set(c.ids) or {str(uuid.UUID(int=0))})
    if c.values is not None:
        match = (
            qe.MatchValue(c.values[0])
            if len(c.values) == 1
            else qe.MatchAny(cast("list[str] | list[int]", list(c.values)))
        )
        return qe.FieldCondition(c.key, match=match)
    return qe.FieldCondition(c.key, range=qe.RangeFloat(lt=c.lt, gte=c.gte))


def edge_filter(m: Match) -> qe.Filter:
    must = [
        _edge_cond(c)
        if isinstance(c, Cond)
        else (_edge_cond(c[0]) if len(c) == 1 else qe.Filter(should=[_edge_cond(x) for x in c]))
        for c in conditions(m)
    ]
    return qe.Filter(must=must)


def _point(p: Any, *, with_vectors: bool = False, score: float = 0.0) -> StoredPoint:
    dense: DenseVector | None = None
    if with_vectors and p.vector is not None:
        vec = p.vector
        raw = vec.get(DENSE) if isinstance(vec, dict) else vec
        if raw is not None:
            dense = np.asarray(raw, dtype=np.float32)
    return StoredPoint(id=str(p.id), payload=dict(p.payload or {}), score=score, dense=dense)


class EdgeStore:
    kind = "embedded"

    def __init__(self, path: Path, *, exact: bool = False) -> None:
        self._path = path
        self._exact = exact
        self._shard: qe.EdgeShard | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-edge")

    async def _run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn)
        except (StoreError, SchemaMismatch, EngramError):
            raise
        except Exception as exc:
            raise StoreError(f"embedded store: {exc}") from exc

    @property
    def shard(self) -> qe.EdgeShard:
        if self._shard is None:
            raise StoreError("embedded store is not open")
        return self._shard

    async def open(self, dimension: int | None) -> None:
        def _open() -> None:
            if dimension is None and not self._path.exists():
                raise StoreError(f"embedded store: no collection at {self._path}")
            self._path.mkdir(parents=True, exist_ok=True)
            has_data = any(self._path.iterdir())
            if not has_data and dimension is None:
                raise StoreError(f"embedded store: no collection at {self._path}")
            try:
                shard = (
                    _load(self._path, dimension)
                    if has_data
                    else qe.EdgeShard.create(str(self._path), _config(dimension or 1))
                )
            except Exception as exc:
                if "WouldBlock" in str(exc) or "lock" in str(exc).lower():
                    raise StoreLocked(
                        f"the data dir {self._path} is in use by another Engram process; stop it "
                        "or point ENGRAM_DATA_DIR elsewhere"
                    ) from None
                raise
            stored = _stored_dimension(shard)
            if dimension is not None and stored is not None and stored != dimension:
                shard.close()
                raise SchemaMismatch(
                    f"the stored collection at {self._path} holds {stored}-dimensional vectors but "
                    f"the configured embedder produces {dimension}; run `engram reembed` or use "
                    "the embedder the collection was built with"
                )
            for name in KEYWORD_INDEXES:
                shard.update(
                    qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword)
                )
            for name in INTEGER_INDEXES:
                shard.update(
                    qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Integer)
                )
            for name in FLOAT_INDEXES:
                shard.update(
                    qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Float)
                )
            self._shard = shard

        await self._run(_open)

    async def close(self) -> None:
        def _close() -> None:
            if self._shard is not None:
                self._shard.flush()
                self._shard.close()
                self._shard = None

        await self._run(_close)
        self._executor.shutdown(wait=True)

    async def healthy(self) -> bool:
        return self._shard is not None

    async def upsert(self, points: Sequence[PointWrite]) -> None:
        if not points:
            return
        edge_points = []
        for p in points:
            vec: dict[str, Any] = {DENSE: np.asarray(p.dense, dtype=np.float32).tolist()}
            if p.sparse is not None and p.sparse.indices:
                vec[SPARSE] = qe.SparseVector(p.sparse.indices, p.sparse.values)
            edge_points.append(qe.Point(p.id, vec, with_live_fields(p.payload)))

        # No flush per write: qdrant-edge's WAL already survives a kill -9 (tested), and a
        # flush per write cost 20-90 ms at 10k-100k points. Segments are flushed on close.
        def _upsert() -> None:
            self.shard.update(qe.UpdateOperation.upsert_points(edge_points))

        await self._run(_upsert)

    async def retrieve(
        self, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[StoredPoint]:
        if not ids:
            return []
        records = await self._run(
            lambda: self.shard.retrieve(list(ids), with_payload=True, with_vector=with_vectors)
        )
        return [_point(r, with_vectors=with_vectors) for r in records]

    async def query(
        self,
        *,
        dense: DenseVector | None,
        sparse: SparseVec | None,
        match: Match,
        limit: int,
        mode: SearchMode,
    ) -> list[StoredPoint]:
        flt = edge_filter(match)
        dense_params = (
            qe.SearchParams(exact=True)
            if self._exact
            else qe.SearchParams(
                quantization=qe.QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING)
            )
        )
        dense_q = (
            qe.Query.Nearest(np.asarray(dense, dtype=np.float32).tolist(), using=DENSE)
            if dense is not None
            else None
        )
        sparse_q = (
            qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using=SPARSE)
            if sparse is not None and sparse.indices
            else None
        )
        if mode == "sparse" and sparse_q is None:
            return []
        if mode == "dense" or (mode == "hybrid" and sparse_q is None):
            if dense_q is None:
                raise StoreError("dense search needs a query vector")
            req = qe.QueryRequest(
                limit=limit, query=dense_q, filter=flt, with_payload=True, params=dense_params
            )
        elif mode == "sparse":
            req = qe.QueryRequest(limit=limit, query=sparse_q, filter=flt, with_payload=True)
        else:
            fetch = prefetch_depth(limit)
            req = qe.QueryRequest(
                limit=limit,
                prefetches=[
                    qe.Prefetch(limit=fetch, query=dense_q, filter=flt, params=dense_params),
                    qe.Prefetch(limit=fetch, query=sparse_q, filter=flt),
                ],
                query=qe.Fusion.Rrf(k=RRF_K),  # type: ignore[arg-type]  # stub omits nested Rrf
                with_payload=True,
            )
        hits = await self._run(lambda: self.shard.query(req))
        return [_point(h, score=float(h.score)) for h in hits]

    async def query_batch(
        self,
        vectors: Sequence[DenseVector],
        *,
        match: Match,
        limit: int,
        score_threshold: float,
        with_payload: bool = True,
    ) -> list[list[StoredPoint]]:
        if not vectors:
            return []
        flt = edge_filter(match)
        reqs = [
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(np.asarray(v, dtype=np.float32).tolist(), using=DENSE),
                filter=flt,
                with_payload=with_payload,
                score_threshold=score_threshold,
                params=qe.SearchParams(exact=True),
            )
            for v in vectors
        ]
        results = await self._run(lambda: self.shard.query_batch(qe.QueryBatchRequest(reqs)))
        return [[_point(h, score=float(h.score)) for h in hits] for hits in results]

    async def scroll(
        self, match: Match, *, limit: int, offset: str | None = None, with_vectors: bool = False
    ) -> tuple[list[StoredPoint], str | None]:
        req = qe.ScrollRequest(
            offset=offset,
            limit=limit,
            filter=edge_filter(match),
            with_payload=True,
            with_vector=with_vectors,
        )
        records, nxt = await self._run(lambda: self.shard.scroll(req))
        return [_point(r, with_vectors=with_vectors) for r in records], (
            str(nxt) if nxt is not None else None
        )

    async def count(self, match: Match) -> int:
        return await self._run(
            lambda: self.shard.count(qe.CountRequest(exact=True, filter=edge_filter(match)))
        )

    async def facet(self, key: str, match: Match, *, limit: int = 1000) -> dict[str, int]:
        resp = await self._run(
            lambda: self.shard.facet(
                qe.FacetRequest(key=key, limit=limit, exact=True, filter=edge_filter(match))
            )
        )
        return {str(h.value): int(h.count) for h in resp.hits}

    async def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        await self.set_payloads([(ids, payload)])

    async def set_payloads(self, updates: Sequence[tuple[Sequence[str], dict[str, Any]]]) -> None:
        if not any(ids for ids, _ in updates):
            return

        def _set() -> None:
            need = ids_needing_scope(updates)
            recs = (
                self.shard.retrieve(
                    cast("list[PointId]", need), with_payload=["scope"], with_vector=False
                )
                if need
                else []
            )
            scopes = {str(r.id): str((r.payload or {}).get("scope", "")) for r in recs}
            for ids, payload in live_updates(updates, scopes):
                if ids:
                    self.shard.update(qe.UpdateOperation.set_payload(list(ids), payload))

        await self._run(_set)

    async def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return

        def _delete() -> None:
            self.shard.update(qe.UpdateOperation.delete_points(list(ids)))

        await self._run(_delete)


def _load(path: Path, dimension: int | None) -> qe.EdgeShard:
    if dimension is None:
        return qe.EdgeShard.load(str(path))
    # Loading with the current config persists it for next time. A shard made before
    # quantization was configured keeps exact-scanning its old segments (loading does not
    # rebuild them): slower, never wrong.
    try:
        return qe.EdgeShard.load(str(path), _config(dimension))
    except Exception as exc:
        if "incompatible" not in str(exc).lower():
            raise
    # Another dimension: load as stored so the caller can say which and what to do.
    return qe.EdgeShard.load(str(path))


def _config(dimension: int) -> qe.EdgeConfig:
    binary = qe.BinaryQuantizationConfig(
        memory=qe.Memory.Pinned,
        query_encoding=qe.BinaryQuantizationQueryEncoding.Scalar8Bits,
    )
    return qe.EdgeConfig(
        vectors={
            DENSE: qe.EdgeVectorParams(
                size=dimension, distance=qe.Distance.Cosine, quantization_config=binary
            )
        },
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        # The payload of the hits is read on every search: Cold (the default, uncached mmap)
        # cost ~0.5 ms of a 3 ms search. One search thread: a shard has few segments, and the
        # cores are better spent on the embedder and the event loop.
        payload_memory=qe.Memory.Cached,
        max_search_threads=1,
    )


def _stored_dimension(shard: qe.EdgeShard) -> int | None:
    records, _ = shard.scroll(qe.ScrollRequest(limit=1, with_payload=False, with_vector=[DENSE]))
    if not records or records[0].vector is None:
        return None
    vec = records[0].vector
    raw = vec.get(DENSE) if isinstance(vec, dict) else vec
    return len(raw) if isinstance(raw, list) else None

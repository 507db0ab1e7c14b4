"""Server store: a Qdrant server through qdrant-client's async API.

The same class runs against qdrant-client's local mode (``path=``) in tests, as the stand-in
for a server: it is slow (a Python brute-force scan) but speaks the same API.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from qdrant_client import AsyncQdrantClient, models

from .base import (
    DENSE,
    FLOAT_INDEXES,
    INTEGER_INDEXES,
    KEYWORD_INDEXES,
    SPARSE,
    Cond,
    DenseVector,
    Fusion,
    IndexStatus,
    Match,
    PointWrite,
    SchemaMismatch,
    SearchMode,
    SparseVec,
    StoredPoint,
    StoreError,
    Unless,
    conditions,
    ids_needing_scope,
    live_updates,
    prefetch_depth,
    with_live_fields,
)


def _client_cond(c: Cond) -> Any:
    if c.ids is not None:
        return models.HasIdCondition(has_id=list(c.ids))
    if c.values is not None:
        match: Any = (
            models.MatchValue(value=c.values[0])
            if len(c.values) == 1
            else models.MatchAny(any=cast("list[str] | list[int]", list(c.values)))
        )
        return models.FieldCondition(key=c.key, match=match)
    return models.FieldCondition(key=c.key, range=models.Range(lt=c.lt, gte=c.gte))


def _client_part(c: Cond | Unless) -> Any:
    if isinstance(c, Unless):
        return models.Filter(must=[_client_cond(c.cond)], must_not=[_client_cond(c.unless)])
    return _client_cond(c)


def client_filter(m: Match) -> models.Filter:
    must = [
        _client_cond(c)
        if isinstance(c, Cond)
        else models.Filter(should=[_client_part(x) for x in c])
        for c in conditions(m)
    ]
    return models.Filter(must=must)


def _dense_of(vector: Any) -> DenseVector | None:
    raw = vector.get(DENSE) if isinstance(vector, dict) else vector
    return np.asarray(raw, dtype=np.float32) if raw is not None else None


def _point(p: Any, *, with_vectors: bool = False) -> StoredPoint:
    dense = _dense_of(p.vector) if with_vectors and p.vector is not None else None
    return StoredPoint(
        id=str(p.id),
        payload=dict(p.payload or {}),
        score=float(getattr(p, "score", 0.0) or 0.0),
        dense=dense,
    )


class QdrantServerStore:
    def __init__(
        self,
        collection: str,
        *,
        url: str = "",
        api_key: str | None = None,
        path: Path | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self._collection = collection
        self.fusion = Fusion()
        if path is not None:
            self.kind = "local-client"
            self._client = AsyncQdrantClient(path=str(path))
        else:
            self.kind = "server"
            self._client = AsyncQdrantClient(
                url=url, api_key=api_key, timeout=int(timeout_s), check_compatibility=False
            )

    @property
    def client(self) -> AsyncQdrantClient:
        return self._client

    @property
    def collection(self) -> str:
        return self._collection

    async def open(self, dimension: int | None) -> None:
        try:
            if await self._client.collection_exists(self._collection):
                info = await self._client.get_collection(self._collection)
                vectors = info.config.params.vectors
                stored = vectors.get(DENSE) if isinstance(vectors, dict) else None
                if dimension is not None and (stored is None or stored.size != dimension):
                    have = stored.size if stored is not None else "unnamed"
                    raise SchemaMismatch(
                        f"collection '{self._collection}' holds {have}-dimensional vectors but the "
                        f"configured embedder produces {dimension}; run `engram reembed` or use "
                        "the embedder the collection was built with"
                    )
            elif dimension is None:
                raise StoreError(f"qdrant: collection '{self._collection}' does not exist")
            else:
                await self._client.create_collection(
                    self._collection,
                    vectors_config={
                        DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)
                    },
                    sparse_vectors_config={
                        SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)
                    },
                )
            if self.kind == "server":
                # Local mode ignores payload indexes (and warns), so only a server gets them.
                for name in KEYWORD_INDEXES:
                    await self._client.create_payload_index(
                        self._collection, name, models.PayloadSchemaType.KEYWORD
                    )
                for name in INTEGER_INDEXES:
                    await self._client.create_payload_index(
                        self._collection, name, models.PayloadSchemaType.INTEGER
                    )
                for name in FLOAT_INDEXES:
                    await self._client.create_payload_index(
                        self._collection, name, models.PayloadSchemaType.FLOAT
                    )
        except (SchemaMismatch, StoreError):
            raise
        except Exception as exc:
            raise StoreError(f"qdrant: cannot open collection '{self._collection}': {exc}") from exc

    async def close(self) -> None:
        await self._client.close()

    def index_status(self) -> IndexStatus | None:
        return None

    async def healthy(self) -> bool:
        try:
            return bool(await self._client.collection_exists(self._collection))
        except Exception:
            return False

    async def upsert(self, points: Sequence[PointWrite]) -> None:
        if not points:
            return
        structs = []
        for p in points:
            vec: dict[str, Any] = {DENSE: np.asarray(p.dense, dtype=np.float32).tolist()}
            if p.sparse is not None and p.sparse.indices:
                vec[SPARSE] = models.SparseVector(indices=p.sparse.indices, values=p.sparse.values)
            structs.append(
                models.PointStruct(id=p.id, vector=vec, payload=with_live_fields(p.payload))
            )
        try:
            await self._client.upsert(self._collection, points=structs, wait=True)
        except Exception as exc:
            raise StoreError(f"qdrant: upsert failed: {exc}") from exc

    async def retrieve(
        self, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[StoredPoint]:
        if not ids:
            return []
        try:
            recs = await self._client.retrieve(
                self._collection,
                ids=list(ids),
                with_payload=True,
                with_vectors=[DENSE] if with_vectors else False,
            )
        except Exception as exc:
            raise StoreError(f"qdrant: retrieve failed: {exc}") from exc
        return [_point(r, with_vectors=with_vectors) for r in recs]

    async def query(
        self,
        *,
        dense: DenseVector | None,
        sparse: SparseVec | None,
        match: Match,
        limit: int,
        mode: SearchMode,
    ) -> list[StoredPoint]:
        flt = client_filter(match)
        sparse_q = (
            models.SparseVector(indices=sparse.indices, values=sparse.values)
            if sparse is not None and sparse.indices
            else None
        )
        dense_q = np.asarray(dense, dtype=np.float32).tolist() if dense is not None else None
        try:
            if mode == "sparse":
                if sparse_q is None:
                    return []
                resp = await self._client.query_points(
                    self._collection, query=sparse_q, using=SPARSE, query_filter=flt, limit=limit
                )
            elif mode == "dense" or sparse_q is None:
                if dense_q is None:
                    raise StoreError("dense search needs a query vector")
                resp = await self._client.query_points(
                    self._collection, query=dense_q, using=DENSE, query_filter=flt, limit=limit
                )
            else:
                fetch = prefetch_depth(limit)
                resp = await self._client.query_points(
                    self._collection,
                    prefetch=[
                        models.Prefetch(query=dense_q, using=DENSE, filter=flt, limit=fetch),
                        models.Prefetch(query=sparse_q, using=SPARSE, filter=flt, limit=fetch),
                    ],
                    query=(
                        models.FusionQuery(fusion=models.Fusion.DBSF)
                        if self.fusion.kind == "dbsf"
                        else models.RrfQuery(
                            rrf=models.Rrf(k=self.fusion.k, weights=self.fusion.weights)
                        )
                    ),
                    limit=limit,
                )
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"qdrant: query failed: {exc}") from exc
        return [_point(p) for p in resp.points]

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
        flt = client_filter(match)
        reqs = [
            models.QueryRequest(
                query=np.asarray(v, dtype=np.float32).tolist(),
                using=DENSE,
                filter=flt,
                limit=limit,
                score_threshold=score_threshold,
                with_payload=with_payload,
            )
            for v in vectors
        ]
        try:
            resps = await self._client.query_batch_points(self._collection, requests=reqs)
        except Exception as exc:
            raise StoreError(f"qdrant: batch query failed: {exc}") from exc
        return [[_point(p) for p in r.points] for r in resps]

    async def scroll(
        self, match: Match, *, limit: int, offset: str | None = None, with_vectors: bool = False
    ) -> tuple[list[StoredPoint], str | None]:
        try:
            recs, nxt = await self._client.scroll(
                self._collection,
                scroll_filter=client_filter(match),
                limit=limit,
                offset=offset,
                with_payload=True,
                with_vectors=[DENSE] if with_vectors else False,
            )
        except Exception as exc:
            raise StoreError(f"qdrant: scroll failed: {exc}") from exc
        return [_point(r, with_vectors=with_vectors) for r in recs], (
            str(nxt) if nxt is not None else None
        )

    async def count(self, match: Match) -> int:
        try:
            res = await self._client.count(
                self._collection, count_filter=client_filter(match), exact=True
            )
        except Exception as exc:
            raise StoreError(f"qdrant: count failed: {exc}") from exc
        return int(res.count)

    async def facet(self, key: str, match: Match, *, limit: int = 1000) -> dict[str, int]:
        try:
            res = await self._client.facet(
                self._collection,
                key=key,
                facet_filter=client_filter(match),
                limit=limit,
                exact=True,
            )
        except Exception as exc:
            raise StoreError(f"qdrant: facet failed: {exc}") from exc
        return {str(h.value): int(h.count) for h in res.hits}

    async def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        await self.set_payloads([(ids, payload)])

    async def set_payloads(self, updates: Sequence[tuple[Sequence[str], dict[str, Any]]]) -> None:
        if not any(ids for ids, _ in updates):
            return
        try:
            need = ids_needing_scope(updates)
            recs = (
                await self._client.retrieve(
                    self._collection, ids=need, with_payload=["scope"], with_vectors=False
                )
                if need
                else []
            )
            scopes = {str(r.id): str((r.payload or {}).get("scope", "")) for r in recs}
            ops: list[Any] = [
                models.SetPayloadOperation(
                    set_payload=models.SetPayload(payload=payload, points=list(ids))
                )
                for ids, payload in live_updates(updates, scopes)
                if ids
            ]
            if ops:
                await self._client.batch_update_points(
                    self._collection, update_operations=ops, wait=True
                )
        except Exception as exc:
            raise StoreError(f"qdrant: set_payload failed: {exc}") from exc

    async def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        try:
            await self._client.delete(
                self._collection, points_selector=models.PointIdsList(points=list(ids)), wait=True
            )
        except Exception as exc:
            raise StoreError(f"qdrant: delete failed: {exc}") from exc

    async def set_vectors(self, vectors: Sequence[tuple[str, DenseVector]]) -> None:
        if not vectors:
            return
        points = [
            models.PointVectors(id=pid, vector={DENSE: np.asarray(v, dtype=np.float32).tolist()})
            for pid, v in vectors
        ]
        try:
            await self._client.update_vectors(self._collection, points=points, wait=True)
        except Exception as exc:
            raise StoreError(f"qdrant: update_vectors failed: {exc}") from exc

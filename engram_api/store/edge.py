"""Embedded store: qdrant-edge (Qdrant's engine in-process) in the data dir.

qdrant-edge is synchronous; every call goes through one worker thread, which keeps the event
loop free and serialises access to the shard (its thread-safety is not documented).

Points land in a plain segment, searched by scanning every candidate; segments an index build
has written also hold int8 copies of the vectors (:mod:`.edge_config`). Candidates are scored
with those and the best 4x the limit (at least 40) rescored with the full vectors, so returned
scores are exact cosines. A filtered scan costs ~0.2 us per candidate, so once `index_after`
points are unindexed, a child process builds an HNSW graph on a copy of the shard and the
store swaps it in (:mod:`.edge_index`); searches then walk the graph: 0.997 of the exact top 5
at 100k natural-language memories, 0.99 when the query matches nothing closely
(bench/graph_recall.py).
`exact=True` scans full-precision vectors instead and never builds a graph.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import numpy as np
import qdrant_edge as qe

from engram_api.errors import EngramError, StoreLocked

from . import edge_index
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
from .edge_config import load_shard, shard_config

if TYPE_CHECKING:
    from qdrant_edge import PointId

T = TypeVar("T")

log = logging.getLogger(__name__)

# A graph walk keeps the best `hnsw_ef` candidates it has seen, and the best of those are
# rescored with the full vectors. The walk's width is what recall needs in the hard case (top 5
# at 100k narrow memories searched with LoCoMo's questions, 20% filter, 2x rescoring: 0.84 at
# ef 32, 0.977 at 128, 0.983 at 160, 0.988 at 200; see edge_config). Rescoring matters where
# many memories are near-duplicates of one another, since int8 scores cannot order near-ties:
# clusters of 40 at cosine ~0.95 kept 0.63 of the exact top 10 with 2x, 0.97 with 4x, 0.99 with
# 8x. Each rescored candidate reads a full vector from disk, so: 4x the limit, at least 40.
HNSW_EF: Final = 160
RESCORE_FACTOR: Final = 4.0
RESCORED_MIN: Final = 40


def dense_params(limit: int, *, exact: bool, full_vectors: bool = False) -> qe.SearchParams:
    """`full_vectors`: walk the graph without the quantized copies (they are of an older kind)."""
    if exact:
        return qe.SearchParams(exact=True)
    quantization = (
        qe.QuantizationSearchParams(ignore=True)
        if full_vectors
        else qe.QuantizationSearchParams(
            rescore=True, oversampling=max(RESCORE_FACTOR, RESCORED_MIN / max(1, limit))
        )
    )
    return qe.SearchParams(hnsw_ef=max(HNSW_EF, 2 * limit), quantization=quantization)


# Where qdrant-edge keeps a shard's configuration (vector sizes included).
CONFIG_FILE: Final = "edge_config.json"

# Writes taken while a build runs are kept in memory to replay on the copy; past this many
# points (a bulk import) the build is abandoned and tried again later.
JOURNAL_MAX_POINTS: Final = 20_000
RETRY_AFTER_S: Final = 300.0


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


def _edge_part(c: Cond | Unless) -> Any:
    if isinstance(c, Unless):
        return qe.Filter(must=[_edge_cond(c.cond)], must_not=[_edge_cond(c.unless)])
    return _edge_cond(c)


def edge_filter(m: Match) -> qe.Filter:
    must = [
        _edge_cond(c)
        if isinstance(c, Cond)
        else (_edge_part(c[0]) if len(c) == 1 else qe.Filter(should=[_edge_part(x) for x in c]))
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

    def __init__(
        self,
        path: Path,
        *,
        exact: bool = False,
        index_after: int | None = None,
        journal_max_points: int = JOURNAL_MAX_POINTS,
    ) -> None:
        """`index_after`: build an HNSW graph once this many points are unindexed (None: never;
        for long-running processes, since a build outlives a CLI command)."""
        self._path = path
        self._exact = exact
        self.fusion = Fusion()
        self._shard: qe.EdgeShard | None = None
        self._dimension: int | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-edge")
        self._index_after = None if exact else index_after
        self._journal_max = journal_max_points
        # Touched only on the executor thread, except reads for status.
        self._journal: list[qe.UpdateOperation] | None = None
        self._journal_points = 0
        self._indexed = 0
        # Indexed by an older release with other quantized copies; cleared by the next build.
        self._stale_quantization = False
        self._unindexed = 0
        self._unindexed_at_copy = 0
        # Points written since the copy for the last build (not kept by an exact store).
        self._touched: set[str] = set()
        self._build_task: asyncio.Task[bool] | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._closing = False
        self._retry_at = 0.0

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
            edge_index.recover(self._path)
            if dimension is None and not self._path.exists():
                raise StoreError(f"embedded store: no collection at {self._path}")
            self._path.mkdir(parents=True, exist_ok=True)
            has_data = any(self._path.iterdir())
            if not has_data and dimension is None:
                raise StoreError(f"embedded store: no collection at {self._path}")
            try:
                shard = (
                    load_shard(self._path, dimension)
                    if has_data
                    else qe.EdgeShard.create(str(self._path), shard_config(dimension or 1))
                )
            except Exception as exc:
                if "WouldBlock" in str(exc) or "lock" in str(exc).lower():
                    raise StoreLocked(
                        f"the data dir {self._path} is in use by another Engram process; stop it "
                        "or point ENGRAM_DATA_DIR elsewhere"
                    ) from None
                raise
            stored = _stored_dimension(self._path, shard)
            if (
                dimension is not None
                and stored is not None
                and stored != dimension
                and shard.info().points_count == 0
            ):
                # Nothing is stored, so nothing is lost: make the collection for this embedder
                # rather than accept a start whose every write would then fail (and queue).
                shard.close()
                log.warning(
                    "embedded store: %s was created for %d-d vectors and holds no memories; "
                    "recreating it for %d-d vectors",
                    self._path,
                    stored,
                    dimension,
                )
                shutil.rmtree(self._path)
                self._path.mkdir(parents=True)
                shard = qe.EdgeShard.create(str(self._path), shard_config(dimension))
                stored = dimension
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
            self._dimension = dimension or stored
            state = edge_index.read_state(self._path)
            self._indexed, self._stale_quantization = state.indexed_points, state.stale_codes
            self._unindexed = max(0, shard.info().points_count - self._indexed)

        await self._run(_open)
        self._maybe_index()

    async def close(self) -> None:
        self._closing = True
        task = self._build_task
        if task is not None:
            self._kill_child()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task

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
        await self._run(
            lambda: self._apply(
                qe.UpdateOperation.upsert_points(edge_points), [p.id for p in points]
            )
        )
        self._maybe_index()

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
        fetch = prefetch_depth(limit) if mode == "hybrid" else limit
        params = dense_params(fetch, exact=self._exact, full_vectors=self._stale_quantization)
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
                limit=limit, query=dense_q, filter=flt, with_payload=True, params=params
            )
        elif mode == "sparse":
            req = qe.QueryRequest(limit=limit, query=sparse_q, filter=flt, with_payload=True)
        else:
            req = qe.QueryRequest(
                limit=limit,
                prefetches=[
                    qe.Prefetch(limit=fetch, query=dense_q, filter=flt, params=params),
                    qe.Prefetch(limit=fetch, query=sparse_q, filter=flt),
                ],
                query=(
                    qe.Fusion.Dbsf()  # type: ignore[arg-type]  # stub omits nested classes
                    if self.fusion.kind == "dbsf"
                    else qe.Fusion.Rrf(k=self.fusion.k, weights=self.fusion.weights)
                ),
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
                    # A payload change moves the point out of an indexed segment.
                    self._apply(qe.UpdateOperation.set_payload(list(ids), payload), ids)

        await self._run(_set)
        self._maybe_index()

    async def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return

        await self._run(lambda: self._apply(qe.UpdateOperation.delete_points(list(ids)), ()))

    async def set_vectors(self, vectors: Sequence[tuple[str, DenseVector]]) -> None:
        if not vectors:
            return
        ops = [
            qe.PointVectors(pid, {DENSE: np.asarray(v, dtype=np.float32).tolist()})
            for pid, v in vectors
        ]
        await self._run(
            lambda: self._apply(qe.UpdateOperation.update_vectors(ops), [pid for pid, _ in vectors])
        )
        self._maybe_index()

    # --- HNSW index builds (see edge_index for the directory protocol) ---

    def index_status(self) -> IndexStatus:
        return IndexStatus(
            indexed_points=self._indexed,
            unindexed_points=self._unindexed,
            building=self._build_task is not None,
        )

    async def build_index(self) -> bool:
        """Build the HNSW graph now (or join the running build); True if one was swapped in."""
        if self._exact or self._closing:
            return False
        return await asyncio.shield(self._build_task or self._start_build())

    def _apply(self, op: qe.UpdateOperation, ids: Sequence[str]) -> None:
        """Apply a write (executor thread) and keep it for replay if a build is running."""
        self.shard.update(op)
        if not self._exact:
            # Distinct points: access counts rewrite the same hot memories over and over, and
            # each one leaves the graph only once.
            fresh = [i for i in ids if i not in self._touched]
            self._touched.update(fresh)
            self._unindexed += len(fresh)
        if self._journal is not None:
            self._journal.append(op)
            self._journal_points += len(ids)
            if self._journal_points > self._journal_max:
                self._kill_child()

    def _maybe_index(self) -> None:
        if (
            self._index_after is not None
            and self._build_task is None
            and not self._closing
            and self._unindexed >= self._index_after
            and time.monotonic() >= self._retry_at
        ):
            self._start_build()

    def _start_build(self) -> asyncio.Task[bool]:
        self._build_task = asyncio.get_running_loop().create_task(self._build())
        return self._build_task

    async def _build(self) -> bool:
        build_dir = edge_index.sibling(self._path, edge_index.BUILD)
        started = time.perf_counter()
        try:
            points = await self._run(self._copy_for_build)
            code, err = await asyncio.to_thread(self._run_child, build_dir)
            if self._journal_points > self._journal_max:
                raise StoreError(
                    f"{self._journal_points} points were written during the build (more than "
                    f"{self._journal_max} are not kept for replay)"
                )
            if code != 0:
                raise StoreError(f"the build process exited with {code}: {err.strip()[-300:]}")
            pause_ms = await self._run(lambda: self._swap(points))
        except Exception as exc:
            self._retry_at = time.monotonic() + RETRY_AFTER_S
            with contextlib.suppress(Exception):
                await self._run(self._discard_build)
            if not self._closing:
                log.warning(
                    "embedded store: index build abandoned (search stays correct, only "
                    "slower; next try in %.0f s): %s",
                    RETRY_AFTER_S,
                    exc,
                )
            return False
        finally:
            self._build_task = None
        log.info(
            "embedded store: HNSW index built over %d points in %.1f s; requests waited "
            "%.0f ms for the swap",
            points,
            time.perf_counter() - started,
            pause_ms,
        )
        self._maybe_index()
        return True

    def _copy_for_build(self) -> int:
        build_dir = edge_index.sibling(self._path, edge_index.BUILD)
        shutil.rmtree(build_dir, ignore_errors=True)
        self.shard.flush()
        shutil.copytree(self._path, build_dir)
        # From here on every write goes to the live shard and to the journal.
        self._journal, self._journal_points = [], 0
        self._unindexed_at_copy, self._unindexed = self._unindexed, 0
        self._touched = set()
        return int(self.shard.info().points_count)

    def _run_child(self, build_dir: Path) -> tuple[int, str]:
        if self._dimension is None:
            raise StoreError("embedded store is not open")
        proc = subprocess.Popen(
            edge_index.build_command(build_dir, self._dimension),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._child = proc
        if self._closing or self._journal_points > self._journal_max:
            proc.kill()
        try:
            _, err = proc.communicate()
        finally:
            self._child = None
        return proc.returncode, err.decode("utf-8", errors="replace")

    def _kill_child(self) -> None:
        child = self._child
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()

    def _discard_build(self) -> None:
        # The copied points are still unindexed; count them again.
        self._unindexed += self._unindexed_at_copy
        self._unindexed_at_copy = 0
        self._journal = None
        shutil.rmtree(edge_index.sibling(self._path, edge_index.BUILD), ignore_errors=True)

    def _swap(self, points: int) -> float:
        """Put the built copy in place of the live shard (executor thread; requests wait)."""
        started = time.perf_counter()
        path = self._path
        old = edge_index.sibling(path, edge_index.OLD)
        trash = edge_index.sibling(path, edge_index.TRASH)
        journal = self._journal or []
        live = self.shard
        live.flush()
        live.close()
        self._shard = None
        built: qe.EdgeShard | None = None
        try:
            path.rename(old)
            edge_index.sibling(path, edge_index.BUILD).rename(path)
            built = load_shard(path, self._dimension)
            for op in journal:
                built.update(op)
            built.flush()
        except Exception:
            if built is not None:
                with contextlib.suppress(Exception):
                    built.close()
            # Exactly what a restart would do: the old shard, which took every write, is back.
            edge_index.recover(path)
            self._shard = load_shard(path, self._dimension)
            raise
        finally:
            self._journal = None
        self._shard = built
        self._unindexed_at_copy = 0
        old.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)
        edge_index.write_state(path, points)
        self._indexed = points
        self._stale_quantization = False
        return (time.perf_counter() - started) * 1000


def _stored_dimension(path: Path, shard: qe.EdgeShard) -> int | None:
    """The collection's vector size: from its configuration, which an empty shard has too."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return int(json.loads((path / CONFIG_FILE).read_text())["vectors"][DENSE]["size"])
    records, _ = shard.scroll(qe.ScrollRequest(limit=1, with_payload=False, with_vector=[DENSE]))
    if not records or records[0].vector is None:
        return None
    vec = records[0].vector
    raw = vec.get(DENSE) if isinstance(vec, dict) else vec
    return len(raw) if isinstance(raw, list) else None

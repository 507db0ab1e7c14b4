"""The composition root: settings in, a running engine out.

Every entry point (CLI, HTTP server, stdio server, maintenance) opens the engine here, so
they all share one wiring of store, embedder, policy, guard and queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from engram_api.datadir import DataDirLock
from engram_api.embeddings.base import Embedder, EmbeddingConfigError, EmbeddingError
from engram_api.embeddings.chain import EmbedderChain
from engram_api.errors import EngramError
from engram_api.memory.guards import SecretGuard, SecretPatternError
from engram_api.memory.policy import PolicyEngine
from engram_api.memory.queue import DurableQueue
from engram_api.memory.reembed import repair_stray_vectors, resolve_embedded
from engram_api.memory.service import MemoryService, PreparedWrite
from engram_api.settings import EngramSettings, SettingsError
from engram_api.store.base import MemoryStore, SchemaMismatch, StoreError, fusion_for
from engram_api.store.edge import EdgeStore
from engram_contract.permissions import (
    PermissionConfig,
    builtin_permission_config,
    load_permission_config,
)

log = logging.getLogger(__name__)


class StartupError(EngramError):
    """Engram cannot start with this configuration; the message says what to change."""

    kind = "startup_error"


@dataclass
class Engine:
    settings: EngramSettings
    service: MemoryService
    queue: DurableQueue
    store: MemoryStore
    embedder: Embedder


def load_permissions(path: Path | None) -> PermissionConfig:
    if path is None:
        return builtin_permission_config()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StartupError(f"permissions_file {path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise StartupError(f"permissions_file {path}: not UTF-8 text (byte {exc.start})") from None
    try:
        return load_permission_config(text)
    except ValueError as exc:
        raise StartupError(f"permissions_file {path}: {exc}") from None


def build_embedder(settings: EngramSettings) -> Embedder:
    from engram_api.embeddings.factory import build_embedder as factory

    try:
        return factory(settings.embeddings)
    except EmbeddingConfigError as exc:
        raise StartupError(f"embeddings: {exc}") from None


def build_store(
    settings: EngramSettings, collection: str | None = None, *, background: bool = False
) -> MemoryStore:
    """`background`: a long-running process, which may build search indexes as it goes."""
    s = settings.store
    if collection is not None:
        s = s.model_copy(update={"collection": collection})
    if s.mode == "embedded":
        qdrant_dir = settings.data_dir / "qdrant"
        exact = s.exact_search
        if exact is None:
            emb = settings.embeddings
            exact = emb.primary.provider == "hash" and (
                emb.fallback is None or emb.fallback.provider == "hash"
            )
        return EdgeStore(
            qdrant_dir / resolve_embedded(qdrant_dir, s.collection),
            exact=exact,
            index_after=(s.index_threshold or None) if background else None,
        )
    # qdrant-client takes half a second to import; embedded users never pay for it.
    from engram_api.store.qdrant_server import QdrantServerStore

    if s.mode == "local-client":
        return QdrantServerStore(s.collection, path=settings.data_dir / "qdrant-local")
    if not s.url:
        raise StartupError("store.url (env ENGRAM_STORE__URL): required when store.mode is server")
    key = s.api_key.get_secret_value() if s.api_key else None
    return QdrantServerStore(s.collection, url=s.url, api_key=key, timeout_s=s.timeout_s)


def queued_body_to_write(service: MemoryService, body: dict[str, Any]) -> PreparedWrite:
    return service.prepare_add(
        agent=body["agent"],
        content=body["content"],
        scope=body["scope"],
        mem_type=body["mem_type"],
        source=body["source"],
        trust=body["trust"],
        context=body.get("context", ""),
        write_id=body["write_id"],
        created_at=datetime.fromisoformat(body["created_at"].replace("Z", "+00:00")),
    )


def in_collection_space(emb: Embedder) -> Embedder:
    """What embeds for the collection: only the members whose model built it (see chain.py)."""
    if isinstance(emb, EmbedderChain):
        view = emb.for_model(emb.model_id)
        if view is not None:
            return view
    return emb


async def check_collection(store: MemoryStore, emb: Embedder, collection: str) -> list[str]:
    """Every chain member against the collection: StartupError if the primary cannot search it.

    Returns notes for the log (a fallback of another model, stray vectors of other models).
    """
    from engram_api.store.base import Match

    chain = emb if isinstance(emb, EmbedderChain) else EmbedderChain([emb])
    models = await store.facet("embedding_model", Match(archived=None))
    try:
        return chain.check_collection(collection=collection, dimension=None, models=models)
    except EmbeddingConfigError as exc:
        raise StartupError(f"embeddings: {exc}") from None


async def recorded_model(store: MemoryStore) -> str:
    """The embedding model recorded in the collection ("" when it is empty)."""
    from engram_api.store.base import Match

    points, _ = await store.scroll(Match(archived=None), limit=1)
    return str(points[0].payload.get("embedding_model", "")) if points else ""


async def adopt_recorded_local_model(
    store: MemoryStore, emb: Embedder, settings: EngramSettings
) -> Embedder:
    """The embedder to serve an opened collection with when the local model is left to default.

    The default local model changed (MiniLM, English only -> multilingual-e5-small): a new
    collection gets the new one, but a collection recorded with another local model keeps being
    served by that model, so existing data dirs keep working with no step; `engram reembed`
    moves them. A model named in the settings is never replaced.
    """
    from engram_api.embeddings.factory import local_model

    primary = settings.embeddings.primary
    if primary.provider != "local" or primary.model or settings.embeddings.fallback is not None:
        return emb
    stored = await recorded_model(store)
    if not stored.startswith("local/") or stored == emb.model_id:
        return emb
    try:
        local_model(stored)
    except EmbeddingConfigError:
        return emb  # not a local model we ship: the model check explains it
    pinned = settings.embeddings.model_copy(
        update={"primary": primary.model_copy(update={"model": stored})}
    )
    log.info(
        "collection was embedded with %s: serving it with that model "
        "(run `engram reembed --to %s` to move it to the default)",
        stored,
        emb.model_id,
    )
    replacement = await asyncio.to_thread(
        build_embedder, settings.model_copy(update={"embeddings": pinned})
    )
    await emb.aclose()
    return replacement


async def warn_if_sparse_vectors_predate_cjk(store: MemoryStore, sample: int = 256) -> bool:
    """Log when memories in CJK were indexed by the old BM25 tokenisation (one token per
    sentence): lexical search misses them until ``engram reembed`` rebuilds their vectors.
    Dense search still finds them. Looks at the first ``sample`` memories only (cheap)."""
    from engram_api.embeddings.bm25 import TOKENIZER, has_cjk
    from engram_api.store.base import Match

    points, _ = await store.scroll(Match(archived=None), limit=sample)
    stale = [
        p
        for p in points
        if p.payload.get("sparse_tokenizer") != TOKENIZER and has_cjk(str(p.payload.get("content")))
    ]
    if stale:
        log.warning(
            "%d of the first %d memories hold Chinese/Japanese/Korean text indexed before BM25 "
            "tokenised CJK (%s): keyword search misses them until `engram reembed --to "
            "local/multilingual-e5-small-q4` rebuilds their vectors, dense and sparse",
            len(stale),
            len(points),
            TOKENIZER,
        )
    return bool(stale)


@contextlib.asynccontextmanager
async def open_engine(
    settings: EngramSettings,
    *,
    background: bool = True,
    embedder: Embedder | None = None,
    holder: str = "",
    control: bool = False,
) -> AsyncIterator[Engine]:
    """Open everything, yield the engine, close everything in reverse order.

    ``holder`` says what this process is in the data-dir lock (a second one names it);
    ``control``: this process will answer CLI commands on the control socket.
    """
    try:
        guard = SecretGuard(settings.guards.extra_secret_patterns)
    except SecretPatternError as exc:
        raise SettingsError(str(exc)) from None
    policy = PolicyEngine(load_permissions(settings.permissions_file))
    lock = DataDirLock(settings.data_dir)
    lock.acquire(holder, control=control)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(lock.release)
        emb = embedder or build_embedder(settings)
        store = build_store(settings, background=background)
        stack.push_async_callback(store.close)
        reopen: asyncio.Task[None] | None = None
        try:
            emb = await open_store(
                store,
                emb,
                settings.store.collection,
                settings=settings if embedder is None else None,
                closer=stack,
            )
        except StoreError as exc:
            if settings.store.mode != "server":
                raise StartupError(f"store: {exc}") from None
            # A Qdrant server that is down at start must not stop the service: writes queue
            # durably and the store is opened as soon as it answers.
            log.warning("store unavailable at start; retrying in the background: %s", exc)
            reopen = asyncio.get_running_loop().create_task(
                _reopen_until_ready(store, emb, settings.store.collection)
            )
        service = MemoryService(
            store=store,
            embedder=in_collection_space(emb),
            policy=policy,
            guard=guard,
            limits=settings.limits,
            search_mode=settings.store.search_mode,
        )
        stack.push_async_callback(service.aclose)
        queue = DurableQueue(
            settings.data_dir / "queue.sqlite3",
            max_age_s=settings.queue.max_age_s,
            base_delay_s=settings.queue.base_delay_s,
            max_delay_s=settings.queue.max_delay_s,
        )
        stack.push_async_callback(queue.aclose)
        queue.bind(lambda body: queued_body_to_write(service, body), service.write)
        service.queue = queue
        if background:
            queue.start()
            repair = asyncio.get_running_loop().create_task(
                _repair_until_done(store, service.embedder)
            )
            stack.push_async_callback(_cancel, repair)
        try:
            yield Engine(settings=settings, service=service, queue=queue, store=store, embedder=emb)
        finally:
            if reopen is not None:
                reopen.cancel()
                with contextlib.suppress(asyncio.CancelledError, StartupError):
                    await reopen


async def open_store(
    store: MemoryStore,
    emb: Embedder,
    collection: str = "",
    *,
    settings: EngramSettings | None = None,
    closer: contextlib.AsyncExitStack | None = None,
) -> Embedder:
    """Open the store and check it was built for this embedder (StartupError if not).

    With ``settings``, a default local model gives way to the local model recorded in the
    collection (see :func:`adopt_recorded_local_model`); the embedder that serves is returned,
    and registered on ``closer`` when given (also when opening fails).
    """
    try:
        await store.open(emb.dimension)
        if settings is not None:
            emb = await adopt_recorded_local_model(store, emb, settings)
        notes = await check_collection(store, emb, collection or "memories")
        if settings is not None:
            await warn_if_sparse_vectors_predate_cjk(store)
        if hasattr(store, "fusion"):
            store.fusion = fusion_for(emb.model_id)
    except SchemaMismatch as exc:
        raise StartupError(str(exc)) from None
    finally:
        if closer is not None:
            closer.push_async_callback(emb.aclose)
    for note in notes:
        log.warning("%s", note)
    return emb


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _repair_until_done(store: MemoryStore, emb: Embedder) -> None:
    """Give memories embedded by another model the collection model's vectors, retrying
    while the store or that model is down (see :func:`repair_stray_vectors`)."""
    delay = 1.0
    while True:
        try:
            repaired = await repair_stray_vectors(store, emb)
        except (StoreError, EmbeddingError) as exc:
            log.info("stray vectors not repaired yet (%s); retrying in %.0f s", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 300.0)
            continue
        if repaired:
            log.warning(
                "re-embedded %d memories with %s (vectors of another model)", repaired, emb.model_id
            )
        return


async def _reopen_until_ready(store: MemoryStore, emb: Embedder, collection: str) -> None:
    delay = 1.0
    while True:
        await asyncio.sleep(delay)
        try:
            await open_store(store, emb, collection)
        except StoreError:
            delay = min(delay * 2, 30.0)
            continue
        except StartupError as exc:
            log.error("store reachable but unusable: %s", exc)
            return
        log.info("store is reachable again")
        return

"""Restore like reembed: check the whole backup, load it beside the live data, switch at the end.

1. Everything is checked before anything is written: the manifest, the file's checksum and
   size, every line (readable, a memory id, content, finite vector of the manifest's
   dimension, no id twice), the counts per model against the manifest, and the models
   against the configured embedder (another model's vectors cannot be searched with it: the
   way out is to restore with that model configured, then ``engram reembed``).
2. The backup is loaded into a new collection (``<name>__restore-<time>``); the live one is
   only read (to refuse replacing memories without ``force``).
3. Only a complete copy (count and models as the manifest says) is switched to: the embedded
   store's pointer file (atomic rename), or a Qdrant collection alias. On any failure the new
   collection is removed and the live collection is exactly as it was.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import shutil
import uuid
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np
from qdrant_client import AsyncQdrantClient, models

from engram_api.datadir import DataDirLock
from engram_api.embeddings.base import Embedder
from engram_api.embeddings.bm25 import Bm25Encoder
from engram_api.errors import Conflict, EngramError
from engram_api.memory.model import Memory, check_scope, utc_now
from engram_api.memory.reembed import resolve_embedded, switch_embedded
from engram_api.runtime import StartupError, build_embedder, build_store
from engram_api.settings import EngramSettings
from engram_api.store.base import (
    DENSE,
    Match,
    MemoryStore,
    PointWrite,
    SchemaMismatch,
    StoreError,
)
from engram_api.store.qdrant_server import QdrantServerStore

from .portable import DATA_FILE, ExportError, Manifest, read_manifest, read_points, to_write
from .progress import Progress, no_progress
from .snapshots import snapshot_server, upload, verify_local

log = logging.getLogger(__name__)

_BATCH: Final = 256
RESTORE_INFIX: Final = "__restore-"


def restore_name(logical: str) -> str:
    """A new physical collection for one restore (Qdrant names allow ``[A-Za-z0-9_-]``)."""
    stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
    return f"{logical}{RESTORE_INFIX}{stamp}-{uuid.uuid4().hex[:6]}"


def is_snapshot(source: Path) -> bool:
    return source.is_file() and source.name.endswith(".snapshot")


def validate_export(source: Path, manifest: Manifest) -> None:
    """Read every line once, changing nothing: :class:`ExportError` naming the first bad one."""
    data = source / DATA_FILE
    seen: set[str] = set()
    by_model: Counter[str] = Counter()
    n = 0
    try:
        for pid, payload, vec in read_points(source, manifest.dimension):
            n += 1
            where = f"{data} line {n}"
            try:
                canonical = str(uuid.UUID(pid))
            except ValueError:
                raise ExportError(f"{where}: id {pid[:64]!r} is not a memory id (a UUID)") from None
            if canonical in seen:
                raise ExportError(f"{where}: memory {canonical} appears twice")
            seen.add(canonical)
            content = payload.get("content")
            if not isinstance(content, str) or not content.strip():
                raise ExportError(f"{where}: payload.content must be a non-empty string")
            try:
                # Every memory must be one the engine can read back (types, trust, times, scope).
                check_scope(Memory.from_payload(canonical, payload).scope)
            except (EngramError, ValueError, TypeError) as exc:
                raise ExportError(f"{where}: payload is not a valid memory ({exc})") from None
            if not bool(np.all(np.isfinite(vec))) or not float(np.linalg.norm(vec)) > 0.0:
                raise ExportError(f"{where}: the vector is zero or not finite")
            by_model[str(payload.get("embedding_model", ""))] += 1
    except (EOFError, OSError, zlib.error, gzip.BadGzipFile) as exc:
        raise ExportError(f"{data}: truncated or not gzip after line {n} ({exc})") from None
    if n != manifest.count:
        raise ExportError(
            f"{data}: holds {n} memories, the manifest says {manifest.count}; the export is "
            "incomplete"
        )
    if dict(by_model) != manifest.embedding_models:
        raise ExportError(
            f"{data}: memories per embedding model {dict(by_model)} differ from the manifest's "
            f"{manifest.embedding_models}"
        )


def check_models(found: dict[str, int], dimension: int | None, embedder: Embedder) -> None:
    """Refuse vectors the configured embedder cannot search, with the way out."""
    foreign = {m: n for m, n in found.items() if m and m != embedder.model_id}
    wrong_dim = dimension is not None and dimension not in (0, embedder.dimension)
    if not foreign and not wrong_dim:
        return
    held = (
        ", ".join(f"{n} memories embedded with {m}" for m, n in sorted(foreign.items()))
        or "vectors"
    )
    first = next(iter(sorted(foreign)), "the model it was made with")
    raise Conflict(
        f"path: the backup holds {held} ({dimension}-d) but the configured embedder is "
        f"{embedder.model_id} ({embedder.dimension}-d); vectors of different models cannot be "
        f"searched together. Restore it with {first} configured as the embedder, then run "
        f"`engram reembed --to {embedder.model_id}`",
        field="path",
    )


async def load_export(
    store: MemoryStore,
    source: Path,
    manifest: Manifest,
    *,
    skip_existing: bool,
    progress: Callable[[int], None],
) -> tuple[int, int]:
    """Write an export's memories into ``store`` (sparse vectors rebuilt from the text)."""
    bm25 = Bm25Encoder()
    written = skipped = 0
    batch: list[PointWrite] = []

    async def flush() -> None:
        nonlocal written, skipped, batch
        if skip_existing:
            present = {p.id for p in await store.retrieve([w.id for w in batch])}
            skipped += len(present)
            batch = [w for w in batch if w.id not in present]
        await store.upsert(batch)
        written += len(batch)
        batch = []
        progress(written + skipped)

    for pid, payload, vec in read_points(source, manifest.dimension):
        batch.append(to_write(bm25, pid, payload, vec))
        if len(batch) >= _BATCH:
            await flush()
    if batch:
        await flush()
    return written, skipped


async def _count_live(settings: EngramSettings, target: str) -> int:
    """Memories the target collection holds now (0 when it does not exist); read only."""
    if settings.store.mode == "embedded":
        qdrant_dir = settings.data_dir / "qdrant"
        path = qdrant_dir / resolve_embedded(qdrant_dir, target)
        if not path.is_dir() or not any(path.iterdir()):
            return 0
    store = build_store(settings, collection=target)
    try:
        try:
            await store.open(None)
        except StoreError:
            if settings.store.mode == "embedded":
                raise
            return 0  # no such collection on the server
        return await store.count(Match(archived=None))
    finally:
        await store.close()


def _refuse_live(target: str, existing: int, force: bool) -> None:
    if existing and not force:
        raise Conflict(
            f"collection: '{target}' holds {existing} memories; restore into an empty or new "
            "collection (--collection NAME), or pass --force to replace them",
            field="collection",
        )


async def _switch_server(client: AsyncQdrantClient, target: str, new_name: str) -> str | None:
    """Point the alias ``target`` at ``new_name``; returns the collection it pointed at."""
    aliases = {a.alias_name: a.collection_name for a in (await client.get_aliases()).aliases}
    ops: list[Any] = []
    previous = aliases.get(target)
    if previous is not None:
        ops.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=target)))
    elif await client.collection_exists(target):
        # A plain collection under the name (the default set-up): an alias cannot share its
        # name, so it goes, only now that the restored copy is complete (and --force said so,
        # or it was empty).
        await client.delete_collection(target)
    ops.append(
        models.CreateAliasOperation(
            create_alias=models.CreateAlias(collection_name=new_name, alias_name=target)
        )
    )
    await client.update_collection_aliases(change_aliases_operations=ops)
    return previous


async def _into_new_collection(
    settings: EngramSettings,
    target: str,
    expected: int | None,
    embedder: Embedder,
    fill: Callable[[MemoryStore, str], Any],
) -> tuple[str, int]:
    """Make a new collection, ``fill`` it, check it (``expected`` memories, None: as many
    as it got; the models); removed again on any failure."""
    new_name = restore_name(target)
    store = build_store(settings, collection=new_name)
    try:
        try:
            await fill(store, new_name)
        except SchemaMismatch as exc:
            raise StartupError(str(exc)) from None
        restored = await store.count(Match(archived=None))
        if expected is not None and restored != expected:
            raise EngramError(
                f"restore incomplete: {restored} memories in the new collection, the backup "
                f"has {expected}; the live collection '{target}' was not changed"
            )
        check_models(await store.facet("embedding_model", Match(archived=None)), None, embedder)
    except BaseException:
        with contextlib.suppress(Exception):
            await _drop(settings, store, new_name)
        raise
    await store.close()
    return new_name, restored


async def _drop(settings: EngramSettings, store: MemoryStore, name: str) -> None:
    if isinstance(store, QdrantServerStore):
        with contextlib.suppress(Exception):
            await store.client.delete_collection(name)
    await store.close()
    if settings.store.mode == "embedded":
        shutil.rmtree(settings.data_dir / "qdrant" / name, ignore_errors=True)


async def restore(
    settings: EngramSettings,
    source: Path,
    *,
    collection: str | None = None,
    force: bool = False,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Restore a backup as ``collection`` (default: the configured one); see the module doc."""
    target = collection or settings.store.collection
    show = progress or no_progress
    emb = embedder or build_embedder(settings)
    try:
        if is_snapshot(source):
            if settings.store.mode != "server":
                raise EngramError(
                    f"path: {source.name} is a Qdrant server snapshot; restore it with "
                    "store.mode=server (an embedded store restores from an export directory)"
                )
            return await _restore_snapshot(settings, source, target, force, emb)
        manifest = read_manifest(source)
        validate_export(source, manifest)
        check_models(manifest.embedding_models, manifest.dimension, emb)
        lock = DataDirLock(settings.data_dir)
        lock.acquire("engram restore")
        try:
            existing = await _count_live(settings, target)
            _refuse_live(target, existing, force)

            async def fill(store: MemoryStore, _name: str) -> None:
                await store.open(manifest.dimension or emb.dimension)
                await load_export(
                    store,
                    source,
                    manifest,
                    skip_existing=False,
                    progress=lambda n: show("restore", n, manifest.count),
                )

            new_name, restored = await _into_new_collection(
                settings, target, manifest.count, emb, fill
            )
            previous = await _switch(settings, target, new_name)
        finally:
            lock.release()
    finally:
        if embedder is None:
            await emb.aclose()
    return _restored(target, restored, existing, source, new_name, previous) | {
        "embedding_models": manifest.embedding_models
    }


def _restored(
    target: str, memories: int, replaced: int, source: Path, physical: str, previous: str | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": "restored",
        "collection": target,
        "memories": memories,
        "replaced": replaced,
        "source": str(source),
        "physical_collection": physical,
    }
    if previous:
        out["previous_collection"] = previous
    return out


async def _switch(settings: EngramSettings, target: str, new_name: str) -> str | None:
    if settings.store.mode == "embedded":
        qdrant_dir = settings.data_dir / "qdrant"
        previous = resolve_embedded(qdrant_dir, target)
        switch_embedded(qdrant_dir, target, new_name)
        # The replaced shard is kept (not deleted) so a restore can be undone by hand.
        had_data = (qdrant_dir / previous).is_dir() and any((qdrant_dir / previous).iterdir())
        return previous if had_data else None
    store = build_store(settings, collection=new_name)
    if not isinstance(store, QdrantServerStore):  # pragma: no cover - build_store guarantees it
        raise EngramError("store: server mode did not build a server store")
    try:
        return await _switch_server(store.client, target, new_name)
    finally:
        await store.close()


async def _restore_snapshot(
    settings: EngramSettings, source: Path, target: str, force: bool, embedder: Embedder
) -> dict[str, Any]:
    manifest = verify_local(source)
    existing = await _count_live(settings, target)
    _refuse_live(target, existing, force)

    async def fill(store: MemoryStore, name: str) -> None:
        # Recovered by the server into the new collection; its vector size is checked here,
        # its count and models by the caller, before anything is switched.
        await upload(snapshot_server(settings), name, source, str(manifest["sha256"]))
        await store.open(None)
        if not isinstance(store, QdrantServerStore):  # pragma: no cover - server mode
            raise EngramError("store: server mode did not build a server store")
        vectors = (await store.client.get_collection(name)).config.params.vectors
        dense = vectors.get(DENSE) if isinstance(vectors, dict) else None
        check_models({}, dense.size if dense is not None else None, embedder)

    new_name, restored = await _into_new_collection(settings, target, None, embedder, fill)
    previous = await _switch(settings, target, new_name)
    return _restored(target, restored, existing, source, new_name, previous)

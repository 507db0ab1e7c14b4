"""Backups, restore, export and import.

- Server mode: a Qdrant snapshot, downloaded and checked (:mod:`.snapshots`); N kept locally
  and on the server.
- Embedded (and local-client) mode: a portable export (:mod:`.portable`); N kept.
- Restore: a snapshot file or an export directory, into the configured collection or a named
  one. A collection that holds memories is never overwritten without ``force``.
- Import: an export merged into the live collection; memories already there (same id) are
  left alone, and an export embedded by another model is refused.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from engram_api.datadir import DataDirLock
from engram_api.errors import Conflict, EngramError
from engram_api.memory.model import rfc3339, utc_now
from engram_api.runtime import Engine, StartupError, build_store
from engram_api.settings import EngramSettings
from engram_api.store.base import Match, MemoryStore, PointWrite, SchemaMismatch
from engram_api.store.qdrant_server import QdrantServerStore
from engram_contract.report import RunResult, Task

from .lock import LockHeld, run_lock
from .portable import (
    MANIFEST_FILE,
    Manifest,
    read_manifest,
    read_points,
    to_write,
    write_export,
)
from .progress import Progress, no_progress
from .report import MaintenanceReport, save_report
from .snapshots import SnapshotServer, snapshot_backup, upload, verify_local

EXPORT_PREFIX: Final = "export-"
_BATCH: Final = 256


def backup_dir(settings: EngramSettings) -> Path:
    return settings.maintenance.backup.dir or settings.data_dir / "backups"


def snapshot_server(settings: EngramSettings) -> SnapshotServer:
    key = settings.store.api_key.get_secret_value() if settings.store.api_key else None
    return SnapshotServer(settings.store.url, key, settings.maintenance.backup.timeout_s)


def _stamp() -> str:
    return utc_now().strftime("%Y%m%dT%H%M%S.%fZ")


def local_exports(folder: Path) -> list[Path]:
    """Complete exports (a manifest is written last), oldest first."""
    return sorted(
        (p for p in folder.glob(EXPORT_PREFIX + "*") if (p / MANIFEST_FILE).is_file()),
        key=lambda p: p.name,
    )


def _remove_tree(path: Path) -> None:
    for child in path.iterdir():
        if child.is_dir():
            _remove_tree(child)
        else:
            child.unlink()
    path.rmdir()


def prune_exports(folder: Path, keep: int) -> list[str]:
    exports = local_exports(folder)
    dropped = []
    for old in exports[: max(0, len(exports) - keep)]:
        _remove_tree(old)
        dropped.append(old.name)
    return dropped


async def run_backup(engine: Engine, *, progress: Progress | None = None) -> MaintenanceReport:
    """Back up the engine's collection, keep the newest N, and save a report."""
    settings = engine.settings
    cfg = settings.maintenance.backup
    collection = settings.store.collection
    show = progress or no_progress
    report = MaintenanceReport(
        task=Task.backup,
        dry_run=False,
        collection=collection,
        store_kind=engine.store.kind,
        started_at=rfc3339(utc_now()),
        embedding_model=engine.embedder.model_id,
    )
    started = time.monotonic()
    target = backup_dir(settings)
    try:
        async with run_lock(
            engine.store,
            settings.data_dir,
            collection,
            "backup",
            ttl_s=settings.maintenance.lock_ttl_s,
        ):
            store = engine.store
            if isinstance(store, QdrantServerStore) and store.kind == "server":
                step = report.step("snapshot")
                try:
                    snap = await snapshot_backup(
                        store.client,
                        snapshot_server(settings),
                        collection,
                        target,
                        keep=cfg.keep,
                        created_at=report.started_at,
                        server_keep=cfg.server_keep,
                    )
                except EngramError as exc:
                    step.status = "failed"
                    step.error(str(exc))
                else:
                    step.counts.update(
                        bytes=snap.bytes,
                        pruned_local=len(snap.pruned_local),
                        pruned_server=len(snap.pruned_server),
                    )
                    step.add_ids("backup", [str(snap.path)])
                    step.add_ids("pruned_local", snap.pruned_local)
                    step.add_ids("pruned_server", snap.pruned_server)
            else:
                step = report.step("export")
                folder = target / collection
                dest = folder / f"{EXPORT_PREFIX}{_stamp()}-{uuid.uuid4().hex[:6]}"
                total = await store.count(Match(archived=None))
                try:
                    manifest = await write_export(
                        store,
                        dest,
                        collection=collection,
                        created_at=report.started_at,
                        page_size=settings.maintenance.page_size,
                        progress=lambda n: show("export", n, total),
                    )
                except (EngramError, OSError) as exc:
                    step.status = "failed"
                    step.error(f"export failed: {exc}")
                else:
                    pruned = prune_exports(folder, cfg.keep)
                    step.counts.update(
                        memories=manifest.count, bytes=manifest.bytes, pruned_local=len(pruned)
                    )
                    step.add_ids("backup", [str(dest)])
                    step.add_ids("pruned_local", pruned)
    except LockHeld as exc:
        report.result = RunResult.skipped
        report.message = str(exc)
    report.finished_at = rfc3339(utc_now())
    report.elapsed_s = time.monotonic() - started
    if report.result is not RunResult.skipped:
        failed = any(s.status == "failed" for s in report.steps)
        report.result = RunResult.failed if failed else RunResult.succeeded
        report.message = "; ".join(e for s in report.steps for e in s.errors)[:1024]
    save_report(settings.data_dir, report, keep=settings.maintenance.reports_keep)
    return report


def _check_new(dest: Path) -> None:
    if dest.exists():
        raise Conflict(f"path: {dest} already exists; give a new directory", field="path")


def _is_snapshot(source: Path) -> bool:
    return source.is_file() and source.name.endswith(".snapshot")


async def export_to(
    engine: Engine, dest: Path, *, progress: Progress | None = None
) -> dict[str, Any]:
    _check_new(dest)
    show = progress or no_progress
    total = await engine.store.count(Match(archived=None))
    manifest = await write_export(
        engine.store,
        dest,
        collection=engine.settings.store.collection,
        created_at=rfc3339(utc_now()),
        page_size=engine.settings.maintenance.page_size,
        progress=lambda n: show("export", n, total),
    )
    return {"status": "exported", "path": str(dest), **manifest.to_dict()}


async def _load(
    store: MemoryStore,
    source: Path,
    manifest: Manifest,
    *,
    skip_existing: bool,
    progress: Callable[[int], None],
) -> tuple[int, int]:
    from engram_api.embeddings.bm25 import Bm25Encoder

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


async def _clear(store: MemoryStore) -> int:
    removed = 0
    while True:
        page, _ = await store.scroll(Match(archived=None), limit=1024)
        if not page:
            return removed
        await store.delete([p.id for p in page])
        removed += len(page)


async def import_from(
    engine: Engine, source: Path, *, progress: Progress | None = None
) -> dict[str, Any]:
    """Merge an export into the live collection: new ids are added, existing ones kept."""
    manifest = read_manifest(source)
    allowed = set(getattr(engine.embedder, "model_ids", [engine.embedder.model_id]))
    foreign = sorted(m for m in manifest.embedding_models if m and m not in allowed)
    if foreign:
        raise Conflict(
            f"path: the export was embedded with {', '.join(foreign)} but this collection uses "
            f"{engine.embedder.model_id}; vectors of another model cannot be searched together. "
            "Restore it into its own collection (engram restore --collection NAME) instead",
            field="path",
        )
    if manifest.dimension != engine.embedder.dimension:
        raise Conflict(
            f"path: the export holds {manifest.dimension}-dimensional vectors, this collection "
            f"{engine.embedder.dimension}",
            field="path",
        )
    show = progress or no_progress
    written, skipped = await _load(
        engine.store,
        source,
        manifest,
        skip_existing=True,
        progress=lambda n: show("import", n, manifest.count),
    )
    return {"status": "imported", "imported": written, "skipped_existing": skipped}


async def restore(
    settings: EngramSettings,
    source: Path,
    *,
    collection: str | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Restore a backup into ``collection`` (default: the configured one).

    Refuses a collection that holds memories unless ``force``, which replaces them.
    """
    target = collection or settings.store.collection
    tsettings = settings.model_copy(
        update={"store": settings.store.model_copy(update={"collection": target})}
    )
    show = progress or no_progress
    if _is_snapshot(source):
        return await _restore_snapshot(tsettings, source, force=force)
    manifest = read_manifest(source)
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    try:
        store = build_store(tsettings)
        try:
            await store.open(manifest.dimension)
        except SchemaMismatch as exc:
            raise StartupError(str(exc)) from None
        try:
            existing = await store.count(Match(archived=None))
            if existing and not force:
                raise Conflict(
                    f"collection: '{target}' holds {existing} memories; restore into an empty "
                    "or new collection (--collection NAME), or pass --force to replace them",
                    field="collection",
                )
            removed = await _clear(store) if existing else 0
            written, _ = await _load(
                store,
                source,
                manifest,
                skip_existing=False,
                progress=lambda n: show("restore", n, manifest.count),
            )
            restored = await store.count(Match(archived=None))
        finally:
            await store.close()
    finally:
        lock.release()
    if restored != manifest.count:
        raise EngramError(
            f"restore incomplete: {restored} memories in '{target}', the export has "
            f"{manifest.count}"
        )
    return {
        "status": "restored",
        "collection": target,
        "memories": written,
        "replaced": removed,
        "embedding_models": manifest.embedding_models,
        "source": str(source),
    }


async def _restore_snapshot(
    settings: EngramSettings, source: Path, *, force: bool
) -> dict[str, Any]:
    if settings.store.mode != "server":
        raise EngramError(
            f"path: {source.name} is a Qdrant server snapshot; restore it with store.mode=server "
            "(an embedded store restores from an export directory)"
        )
    manifest = verify_local(source)
    target = settings.store.collection
    store = build_store(settings)
    if not isinstance(store, QdrantServerStore):  # pragma: no cover - build_store guarantees it
        raise EngramError("store: server mode did not build a server store")
    try:
        client = store.client
        if await client.collection_exists(target):
            existing = (await client.count(target, exact=True)).count
            if existing and not force:
                raise Conflict(
                    f"collection: '{target}' holds {existing} memories; restore into an empty "
                    "or new collection (--collection NAME), or pass --force to replace them",
                    field="collection",
                )
        await upload(snapshot_server(settings), target, source, str(manifest["sha256"]))
        restored = (await client.count(target, exact=True)).count
    finally:
        await store.close()
    return {
        "status": "restored",
        "collection": target,
        "memories": restored,
        "source": str(source),
    }


__all__ = [
    "LockHeld",
    "backup_dir",
    "export_to",
    "import_from",
    "restore",
    "run_backup",
]

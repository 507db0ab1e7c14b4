"""Backups, restore, export and import.

- Server mode: a Qdrant snapshot, downloaded and checked (:mod:`.snapshots`); N kept locally
  and on the server.
- Embedded (and local-client) mode: a portable export (:mod:`.portable`); N kept.
- Restore (:mod:`.restore`): a snapshot file or an export directory, checked whole, loaded
  into a new collection and switched to only when complete. A collection that holds memories
  is never replaced without ``force``.
- Backups live outside the data dir (:func:`backup_dir`).
- Import: an export merged into the live collection; memories already there (same id) are
  left alone, and an export embedded by another model is refused.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Final

from engram_api.errors import Conflict, EngramError
from engram_api.memory.model import rfc3339, utc_now
from engram_api.runtime import Engine
from engram_api.settings import EngramSettings
from engram_api.store.base import Match
from engram_api.store.qdrant_server import QdrantServerStore
from engram_contract.report import RunResult, Task

from .lock import LockHeld, run_lock
from .portable import (
    MANIFEST_FILE,
    read_manifest,
    write_export,
)
from .progress import Progress, no_progress
from .report import MaintenanceReport, save_report
from .restore import check_models, load_export, restore, validate_export
from .snapshots import snapshot_backup, snapshot_server

EXPORT_PREFIX: Final = "export-"


def backup_dir(settings: EngramSettings) -> Path:
    """Where backups go: never inside the data dir, so wiping it keeps them.

    Default: beside it, ``<data_dir>-backups`` (``~/.local/share/engram-backups`` for the
    default data dir), one per data dir.
    """
    configured = settings.maintenance.backup.dir
    if configured is not None:
        return configured
    data = settings.data_dir.expanduser().absolute()
    return data.with_name(data.name + "-backups")


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


async def import_from(
    engine: Engine, source: Path, *, progress: Progress | None = None
) -> dict[str, Any]:
    """Merge an export into the live collection: new ids are added, existing ones kept."""
    manifest = read_manifest(source)
    validate_export(source, manifest)
    # Only the model that built this collection may add vectors to it (see runtime).
    check_models(manifest.embedding_models, manifest.dimension, engine.embedder)
    show = progress or no_progress
    written, skipped = await load_export(
        engine.store,
        source,
        manifest,
        skip_existing=True,
        progress=lambda n: show("import", n, manifest.count),
    )
    return {"status": "imported", "imported": written, "skipped_existing": skipped}


__all__ = [
    "LockHeld",
    "backup_dir",
    "export_to",
    "import_from",
    "restore",
    "run_backup",
]

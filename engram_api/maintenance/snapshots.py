"""Qdrant server snapshots: create, download, verify, prune (locally and on the server), upload.

Downloads go to ``<backup dir>/<collection>/<snapshot name>`` with a ``.json`` manifest beside
each (size, sha256, the server's checksum, time). A download whose checksum does not match the
server's is deleted and reported, never kept as a backup.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
from qdrant_client import AsyncQdrantClient

from engram_api.errors import EngramError
from engram_api.settings import EngramSettings

from .portable import sha256_file

MANIFEST_SUFFIX: Final = ".json"
_CHUNK: Final = 1 << 20


class SnapshotError(EngramError):
    kind = "backup_failed"


@dataclass(frozen=True)
class SnapshotServer:
    """Where the snapshot REST endpoints are (the client has no download or upload call)."""

    url: str
    api_key: str | None
    timeout_s: float

    def headers(self) -> dict[str, str]:
        return {"api-key": self.api_key} if self.api_key else {}


def snapshot_server(settings: EngramSettings) -> SnapshotServer:
    key = settings.store.api_key.get_secret_value() if settings.store.api_key else None
    return SnapshotServer(settings.store.url, key, settings.maintenance.backup.timeout_s)


@dataclass(frozen=True)
class SnapshotBackup:
    name: str
    path: Path
    bytes: int
    sha256: str
    created_at: str
    pruned_local: list[str]
    pruned_server: list[str]


async def download(server: SnapshotServer, collection: str, name: str, dest: Path) -> str:
    """Stream the snapshot to ``dest``; returns its sha256."""
    h = hashlib.sha256()
    tmp = dest.with_name(dest.name + ".part")
    url = f"{server.url.rstrip('/')}/collections/{collection}/snapshots/{name}"
    try:
        async with (
            httpx.AsyncClient(timeout=server.timeout_s, headers=server.headers()) as http,
            http.stream("GET", url) as resp,
        ):
            if resp.status_code != 200:
                raise SnapshotError(f"downloading snapshot {name} failed: HTTP {resp.status_code}")
            with tmp.open("wb") as f:
                async for chunk in resp.aiter_bytes(_CHUNK):
                    h.update(chunk)
                    f.write(chunk)
    except httpx.HTTPError as exc:
        tmp.unlink(missing_ok=True)
        raise SnapshotError(f"downloading snapshot {name} failed: {type(exc).__name__}") from None
    except SnapshotError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, dest)
    return h.hexdigest()


def local_backups(folder: Path) -> list[Path]:
    """Downloaded snapshots with a manifest, oldest first."""
    found = [p.with_suffix("") for p in folder.glob("*.snapshot" + MANIFEST_SUFFIX)]
    return sorted((p for p in found if p.is_file()), key=lambda p: p.name)


async def snapshot_backup(
    client: AsyncQdrantClient,
    server: SnapshotServer,
    collection: str,
    backup_dir: Path,
    *,
    keep: int,
    created_at: str,
    note: Callable[[str], None] | None = None,
    server_keep: int | None = None,
) -> SnapshotBackup:
    """Snapshot, download and verify; keep ``keep`` backups locally and ``server_keep``
    (default: ``keep``) snapshots on the server. 0 deletes the new one once it is verified."""
    folder = backup_dir / collection
    folder.mkdir(parents=True, exist_ok=True)
    try:
        desc = await client.create_snapshot(collection, wait=True)
    except Exception as exc:
        raise SnapshotError(f"creating a snapshot of '{collection}' failed: {exc}") from None
    if desc is None:
        raise SnapshotError(f"creating a snapshot of '{collection}' returned nothing")
    if note:
        note(f"snapshot {desc.name} created ({desc.size} bytes), downloading")
    dest = folder / desc.name
    digest = await download(server, collection, desc.name, dest)
    size = dest.stat().st_size
    if (desc.checksum and digest != desc.checksum) or size != desc.size:
        dest.unlink(missing_ok=True)
        raise SnapshotError(
            f"snapshot {desc.name}: the download does not match the server's checksum or size"
        )
    manifest: dict[str, Any] = {
        "format": "qdrant-snapshot",
        "collection": collection,
        "name": desc.name,
        "created_at": created_at,
        "server_creation_time": desc.creation_time,
        "bytes": size,
        "sha256": digest,
    }
    (folder / (desc.name + MANIFEST_SUFFIX)).write_text(json.dumps(manifest, indent=2))
    pruned_local = prune_local(folder, keep)
    pruned_server = await prune_server(
        client, collection, keep if server_keep is None else server_keep
    )
    return SnapshotBackup(desc.name, dest, size, digest, created_at, pruned_local, pruned_server)


def prune_local(folder: Path, keep: int) -> list[str]:
    backups = local_backups(folder)
    dropped = []
    for old in backups[: max(0, len(backups) - keep)]:
        old.unlink(missing_ok=True)
        old.with_name(old.name + MANIFEST_SUFFIX).unlink(missing_ok=True)
        dropped.append(old.name)
    return dropped


async def prune_server(client: AsyncQdrantClient, collection: str, keep: int) -> list[str]:
    snaps = await client.list_snapshots(collection)
    snaps.sort(key=lambda s: (s.creation_time or "", s.name))
    dropped = []
    for s in snaps[: max(0, len(snaps) - keep)]:
        await client.delete_snapshot(collection, s.name, wait=True)
        dropped.append(s.name)
    return dropped


def verify_local(path: Path) -> dict[str, Any]:
    """The manifest of a downloaded snapshot, after checking the file against it."""
    mpath = path.with_name(path.name + MANIFEST_SUFFIX)
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise SnapshotError(f"{path}: no readable manifest {mpath.name} beside it") from None
    if not path.is_file() or sha256_file(path) != manifest.get("sha256"):
        raise SnapshotError(f"{path}: checksum does not match its manifest")
    return dict(manifest)


async def upload(server: SnapshotServer, collection: str, path: Path, sha256: str) -> None:
    """Recover ``collection`` from a local snapshot file (created or replaced by the server)."""
    url = f"{server.url.rstrip('/')}/collections/{collection}/snapshots/upload"
    params = {"priority": "snapshot", "wait": "true", "checksum": sha256}
    try:
        async with httpx.AsyncClient(timeout=server.timeout_s, headers=server.headers()) as http:
            with path.open("rb") as f:
                resp = await http.post(url, params=params, files={"snapshot": (path.name, f)})
    except httpx.HTTPError as exc:
        raise SnapshotError(f"uploading {path.name} failed: {type(exc).__name__}") from None
    if resp.status_code != 200:
        raise SnapshotError(f"uploading {path.name} failed: HTTP {resp.status_code}")

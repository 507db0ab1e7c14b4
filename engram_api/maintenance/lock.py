"""One maintenance run (and one backup) per collection at a time.

Two layers:
- a file lock in the data dir (``flock``), for runs sharing a machine or process: the embedded
  store, the CLI next to an MCP server, two tool calls in one server;
- for a Qdrant server, a lock that works across pods: a small collection named after the
  locked one. Creating a collection is atomic in Qdrant (a second create fails, also in a
  cluster, through consensus), so whoever creates it holds the lock. A point inside records
  the holder and an expiry that a heartbeat renews; a lock whose holder died is taken over once
  it has expired.

A run that finds the lock held raises :class:`LockHeld`, whose message says who holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

from qdrant_client import AsyncQdrantClient, models

from engram_api.datadir import ExclusiveFile, HeldElsewhere
from engram_api.errors import EngramError
from engram_api.memory.model import rfc3339, utc_now
from engram_api.store.base import MemoryStore

log = logging.getLogger(__name__)

_LOCK_POINT: Final = str(uuid.UUID(int=1))


class LockHeld(EngramError):
    kind = "maintenance_locked"


def _holder_info() -> dict[str, Any]:
    return {
        "holder": uuid.uuid4().hex,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": rfc3339(utc_now()),
    }


def _describe(info: dict[str, Any]) -> str:
    return (
        f"host {info.get('host', '?')}, pid {info.get('pid', '?')}, since {info.get('since', '?')}"
    )


class FileLock:
    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self._what = what
        self._file = ExclusiveFile(path)

    def acquire(self) -> None:
        try:
            self._file.acquire(json.dumps(_holder_info()))
        except HeldElsewhere as held:
            try:
                info = json.loads(held.holder)
            except ValueError:
                info = {}
            raise LockHeld(
                f"another {self._what} is running ({_describe(info)}); this one exits without "
                "changing anything"
            ) from None

    def release(self) -> None:
        self._file.release()


class QdrantLock:
    def __init__(
        self,
        client: AsyncQdrantClient,
        name: str,
        what: str,
        *,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self.name = name
        self._what = what
        self._ttl = ttl_s
        self._clock = clock
        self._info = _holder_info()
        self._heartbeat: asyncio.Task[None] | None = None

    async def _read(self) -> dict[str, Any] | None:
        try:
            recs = await self._client.retrieve(self.name, ids=[_LOCK_POINT], with_payload=True)
        except Exception:
            return None
        return dict(recs[0].payload or {}) if recs else None

    async def _write(self) -> None:
        payload = {**self._info, "expires_at": self._clock() + self._ttl}
        await self._client.upsert(
            self.name,
            points=[models.PointStruct(id=_LOCK_POINT, vector=[1.0], payload=payload)],
            wait=True,
        )

    async def _create(self) -> bool:
        try:
            await self._client.create_collection(
                self.name,
                vectors_config=models.VectorParams(size=1, distance=models.Distance.COSINE),
            )
        except Exception:
            if await self._client.collection_exists(self.name):
                return False
            raise
        return True

    async def acquire(self) -> None:
        for _ in range(2):
            if await self._create():
                await self._write()
                self._heartbeat = asyncio.get_running_loop().create_task(self._beat())
                return
            held = await self._read()
            if held is None:
                raise LockHeld(
                    f"another {self._what} is starting or died while starting (lock collection "
                    f"'{self.name}' has no holder yet); if no run is active, delete that "
                    "collection"
                )
            if float(held.get("expires_at", 0)) > self._clock():
                raise LockHeld(
                    f"another {self._what} is running ({_describe(held)}); this one exits "
                    "without changing anything"
                )
            log.warning("taking over an expired maintenance lock held by %s", _describe(held))
            with contextlib.suppress(Exception):
                await self._client.delete_collection(self.name)
        raise LockHeld(f"another {self._what} took the expired lock '{self.name}' first")

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)
            try:
                held = await self._read()
                if held is None or held.get("holder") != self._info["holder"]:
                    log.error("the maintenance lock '%s' was taken over", self.name)
                    return
                await self._write()
            except Exception as exc:
                log.warning("could not renew the maintenance lock: %s", exc)

    async def release(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        held = await self._read()
        if held is not None and held.get("holder") == self._info["holder"]:
            await self._client.delete_collection(self.name)


def lock_collection_name(collection: str, purpose: str) -> str:
    return f"{collection}--{purpose}-lock"


@contextlib.asynccontextmanager
async def run_lock(
    store: MemoryStore, data_dir: Path, collection: str, purpose: str, *, ttl_s: float
) -> AsyncIterator[None]:
    """Hold the ``purpose`` lock ("maintenance", "backup") of ``collection``."""
    what = f"{purpose} run on collection '{collection}'"
    file_lock = FileLock(data_dir / "locks" / f"{collection}.{purpose}.lock", what)
    file_lock.acquire()
    try:
        client = getattr(store, "client", None)
        if isinstance(client, AsyncQdrantClient):
            qlock = QdrantLock(client, lock_collection_name(collection, purpose), what, ttl_s=ttl_s)
            await qlock.acquire()
            try:
                yield
            finally:
                await qlock.release()
        else:
            yield
    finally:
        file_lock.release()

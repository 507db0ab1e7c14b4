"""Reload the permission file when it changes, without a restart and without dropping requests.

The file is polled (content digest), which also sees Kubernetes ConfigMap updates: those swap a
symlink rather than write the file in place, which change notifications on the file miss. A new
version is validated completely before it replaces the active one in a single reference swap,
so a request sees either the old config or the new one. An invalid or unreadable version is
rejected with a logged error and the last good config stays active.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from engram_api.memory.policy import PolicyEngine
from engram_api.server.metrics import Metrics
from engram_contract.permissions import load_permission_config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReloadStatus:
    source: str
    digest: str
    applied_at: float
    last_error: str = ""


class PermissionWatcher:
    def __init__(
        self,
        path: Path | None,
        policy: PolicyEngine,
        metrics: Metrics,
        *,
        interval_s: float = 2.0,
    ) -> None:
        self.path = path
        self.policy = policy
        self.metrics = metrics
        self.interval_s = interval_s
        self._digest = ""
        self._rejected = ""
        self._applied_at = time.time()
        self._last_error = ""
        self._priming = False
        self._task: asyncio.Task[None] | None = None
        metrics.permission_last_applied.set(self._applied_at)

    @property
    def status(self) -> ReloadStatus:
        return ReloadStatus(
            source=str(self.path) if self.path else "built-in",
            digest=self._digest[:12],
            applied_at=self._applied_at,
            last_error=self._last_error,
        )

    def prime(self) -> None:
        """Take the file as it is now as the active config, without counting a reload.

        The engine loaded the file a moment earlier; applying it again closes the window in
        which an edit between that load and the first poll would go unnoticed.
        """
        self._priming = True
        try:
            self.check()
        finally:
            self._priming = False

    def check(self) -> bool:
        """Apply the file if it changed since the last look; True when a new config is active."""
        if self.path is None:
            return False
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            self._reject("unreadable", f"cannot read ({exc.strerror})", digest="")
            return False
        digest = _digest(data)
        if digest == self._digest:
            # Back to the active version (after a bad edit or a read failure): nothing is wrong.
            self._rejected = ""
            self._last_error = ""
            return False
        if digest == self._rejected:
            return False
        try:
            config = load_permission_config(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            self._reject(
                "rejected", f"{self.path}: not UTF-8 text (byte {exc.start})", digest=digest
            )
            return False
        except ValueError as exc:
            # The message names line, key and rule, never the file's text.
            self._reject("rejected", f"{self.path}: {exc}", digest=digest)
            return False
        self.policy.replace(config)
        self._digest = digest
        self._rejected = ""
        self._last_error = ""
        self._applied_at = time.time()
        self.metrics.permission_last_applied.set(self._applied_at)
        if self._priming:
            return True
        self.metrics.permission_reloads.labels(result="applied").inc()
        log.info(
            "permission config applied",
            extra={
                "path": str(self.path),
                "digest": digest[:12],
                "agents": len(config.agents),
            },
        )
        return True

    def _reject(self, result: str, error: str, *, digest: str) -> None:
        # Log a given bad version once, not on every poll.
        if digest and digest == self._rejected:
            return
        if not digest and self._last_error == error:
            return
        self._rejected = digest
        self._last_error = error
        self.metrics.permission_reloads.labels(result=result).inc()
        log.error(
            "permission config not applied; the last good one stays active",
            extra={"path": str(self.path), "error": error},
        )

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await asyncio.to_thread(self.check)
            except Exception:
                log.exception("permission reload failed")

    def start(self) -> None:
        if self.path is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

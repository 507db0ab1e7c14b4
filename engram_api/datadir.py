"""Exclusive files: one process owns a data dir, one run owns a maintenance lock.

Both are a ``flock`` on a file that records who holds it, so a second start fails fast and
says whom it is waiting for.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from engram_api.errors import StoreLocked


class HeldElsewhere(Exception):
    """The file is locked by another process; ``holder`` is what that process recorded."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


class ExclusiveFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, holder: str) -> None:
        """Lock without waiting and record ``holder``; :class:`HeldElsewhere` if taken."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            recorded = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            os.close(fd)
            raise HeldElsewhere(recorded) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def describe_holder(recorded: str) -> tuple[str, dict[str, object]]:
    """What a data-dir lock records, for a message: (who, the whole record)."""
    try:
        info = json.loads(recorded)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        # Written by an older Engram: only the pid.
        return f"another Engram process (pid {recorded or 'unknown'})", {"pid": recorded}
    what = str(info.get("what") or "another Engram process")
    return f"{what} (pid {info.get('pid', 'unknown')})", info


class DataDirLock:
    """One process owns a data dir; it records what it is (e.g. ``engram serve at URL``) and
    whether it answers CLI commands on its control socket (:mod:`engram_api.control`)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "engram.lock"
        self._file = ExclusiveFile(self.path)

    def acquire(self, what: str = "", *, control: bool = False) -> None:
        record = {"pid": os.getpid(), "what": what, "control": control}
        try:
            self._file.acquire(json.dumps(record))
        except HeldElsewhere as held:
            who, info = describe_holder(held.holder)
            raise StoreLocked(
                f"data dir {self.path.parent} is in use by {who}; stop it, or set "
                "ENGRAM_DATA_DIR to another directory",
                holder=info,
            ) from None

    def release(self) -> None:
        self._file.release()

"""One process owns a data dir: a second start fails fast with a clear message."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from engram_api.errors import StoreLocked


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "engram.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreLocked(
                f"data dir {self.path.parent} is in use by another Engram process (pid {holder}); "
                "stop it, or set ENGRAM_DATA_DIR to another directory"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

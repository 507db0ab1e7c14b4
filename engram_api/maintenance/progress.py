"""Progress of long steps on the terminal (stderr), throttled so logs stay readable."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Protocol, TextIO


class Progress(Protocol):
    def __call__(self, step: str, done: int, total: int | None) -> None:
        """``done`` of ``total`` items of ``step`` are processed (total None = unknown)."""
        ...


def no_progress(step: str, done: int, total: int | None) -> None:
    return None


class TerminalProgress:
    """One line per update at most every ``interval_s`` (a terminal redraws in place)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        # A pod log keeps every line: update less often there.
        self._interval = interval_s if interval_s is not None else (0.5 if self._tty else 15.0)
        self._clock = clock
        self._last: dict[str, float] = {}
        self._open_line = False

    def __call__(self, step: str, done: int, total: int | None) -> None:
        now = self._clock()
        finished = total is not None and done >= total
        if not finished and now - self._last.get(step, -1e9) < self._interval:
            return
        self._last[step] = now
        if total:
            text = f"{step}: {done}/{total} ({100 * done // max(total, 1)}%)"
        else:
            text = f"{step}: {done}"
        if self._tty:
            self._stream.write(f"\r\x1b[2K{text}")
            self._open_line = not finished
            if finished:
                self._stream.write("\n")
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._tty and self._open_line:
            self._stream.write("\n")
            self._stream.flush()
            self._open_line = False

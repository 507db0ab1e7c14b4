"""The control socket: CLI commands run by the process that owns the data dir.

One process owns an embedded data dir (``engram.lock``). A long-running one (``engram serve``,
``engram stdio``) also listens on ``<data_dir>/engram.sock``, so ``engram add``, ``search``,
``maintenance daily`` and the rest, started beside it, are run by it instead of failing with
"data dir in use". The protocol is one JSON line each way per connection:
``{"command": "add", "args": {...}}`` → ``{"ok": true, "result": {...}}`` or
``{"ok": false, "error": {"kind", "message", "usage"}}``.

Only the data dir's owner may connect: the socket is made mode 0600 and, where the kernel
says who is calling (``SO_PEERCRED``), a caller of another uid is refused. Whoever may connect
could open the data dir itself, so the ``agent`` argument is trusted as in local mode.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from engram_api.errors import (
    EngramError,
    InvalidInput,
    PermissionDenied,
    SecretDetected,
    StoreLocked,
)
from engram_api.runtime import Engine, StartupError
from engram_api.settings import SettingsError

log = logging.getLogger(__name__)

SOCKET_FILE: Final = "engram.sock"
# A unix socket path is at most ~108 bytes; longer data dirs are reached through /proc.
_MAX_PATH: Final = 100
# Big enough for a page of get-all with long memories.
_LINE_LIMIT: Final = 64 * 1024 * 1024
# How long a CLI waits for a starting server's socket (it binds once the engine is open).
STARTUP_WAIT_S: Final = 30.0
_USAGE = (InvalidInput, PermissionDenied, SecretDetected, SettingsError, StartupError)

Handler = Callable[[Engine, argparse.Namespace], Awaitable[dict[str, Any]]]


class RemoteError(EngramError):
    """A command the running server refused or failed; ``usage`` is a bad-input refusal."""

    def __init__(self, kind: str, message: str, *, usage: bool) -> None:
        super().__init__(message)
        self.kind = kind
        self.usage = usage


@contextlib.contextmanager
def socket_path(data_dir: Path) -> Iterator[str]:
    """The path to bind or connect to (through /proc/self/fd when the real one is too long)."""
    path = data_dir / SOCKET_FILE
    if len(str(path)) <= _MAX_PATH or not Path("/proc/self/fd").is_dir():
        yield str(path)
        return
    fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{SOCKET_FILE}"
    finally:
        os.close(fd)


def _peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


class ControlServer:
    def __init__(self, engine: Engine, handlers: Mapping[str, Handler]) -> None:
        self._engine = engine
        self._handlers = handlers

    async def _answer(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict) or not isinstance(request.get("args"), dict):
            return _error("invalid_input", "request: must be {command, args}", usage=True)
        command = request.get("command")
        handler = self._handlers.get(str(command))
        if handler is None:
            return _error(
                "invalid_input",
                f"command: {command!r} cannot run through the server; stop it to run this one",
                usage=True,
            )
        try:
            result = await handler(self._engine, argparse.Namespace(**request["args"]))
        except EngramError as exc:
            return _error(exc.kind, str(exc), usage=isinstance(exc, _USAGE))
        except Exception:
            log.exception("control socket: %s failed", command)
            return _error("internal", f"{command} failed in the server; its log says why")
        return {"ok": True, "result": result}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            uid = _peer_uid(writer)
            if uid is not None and uid != os.getuid():
                answer = _error("permission_denied", "control socket: another user", usage=True)
            else:
                line = await reader.readline()
                try:
                    request = json.loads(line)
                except ValueError:
                    request = None
                answer = await self._answer(request)
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the CLI went away (Ctrl-C); its command may still finish here
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def _error(kind: str, message: str, *, usage: bool = False) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": kind, "message": message, "usage": usage}}


@contextlib.asynccontextmanager
async def serve_control(
    engine: Engine, data_dir: Path, handlers: Mapping[str, Handler]
) -> AsyncIterator[None]:
    """Answer CLI commands on the data dir's socket while the block runs."""
    server = ControlServer(engine, handlers)
    real = data_dir / SOCKET_FILE
    with socket_path(data_dir) as path:
        # Whoever holds the data-dir lock owns the socket: one left behind is stale.
        real.unlink(missing_ok=True)
        listener = await asyncio.start_unix_server(server.handle, path=path, limit=_LINE_LIMIT)
        os.chmod(real, 0o600)
    log.info("answering CLI commands on %s", real)
    try:
        yield
    finally:
        listener.close()
        with contextlib.suppress(Exception):
            await listener.wait_closed()
        real.unlink(missing_ok=True)


def plain_args(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed arguments that travel (values JSON can carry; not the function to call)."""
    return {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in vars(args).items()
        if k != "func" and (v is None or isinstance(v, (str, int, float, bool, list, Path)))
    }


async def _request(path: str, body: bytes) -> dict[str, Any]:
    reader, writer = await asyncio.open_unix_connection(path, limit=_LINE_LIMIT)
    try:
        writer.write(body)
        await writer.drain()
        line = await reader.readline()
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    answer = json.loads(line) if line else None
    if not isinstance(answer, dict):
        raise EngramError("the running server closed the control socket without answering")
    return answer


async def call_owner(
    data_dir: Path, locked: StoreLocked, command: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Run ``command`` in the process that holds the data dir, or re-raise ``locked``.

    A holder that said it answers (``control`` in its lock record) but has not bound its
    socket yet is starting up: wait for it, within a bound.
    """
    if not locked.holder.get("control"):
        raise locked
    body = json.dumps({"command": command, "args": plain_args(args)}).encode() + b"\n"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTUP_WAIT_S
    delay = 0.05
    while True:
        with socket_path(data_dir) as path:
            try:
                answer = await _request(path, body)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if loop.time() > deadline:
                    raise StoreLocked(
                        f"{locked}; its control socket {data_dir / SOCKET_FILE} does not answer",
                        holder=locked.holder,
                    ) from None
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
    if answer.get("ok"):
        result = answer.get("result")
        return result if isinstance(result, dict) else {}
    err = answer.get("error") or {}
    raise RemoteError(
        str(err.get("kind", "error")), str(err.get("message", "")), usage=bool(err.get("usage"))
    )


__all__ = ["RemoteError", "call_owner", "serve_control"]

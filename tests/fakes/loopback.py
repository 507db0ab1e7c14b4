"""A tiny HTTP/1.1 server on 127.0.0.1 (asyncio + h11) for fake APIs.

Starts and stops at once (no polling loop), lets a handler hang until the server stops, and
can drop a connection without answering, which real frameworks make hard.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import h11


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    # Close the connection without answering (the client sees a broken connection).
    drop: bool = False

    @classmethod
    def of_json(cls, payload: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(payload).encode(), [("content-type", "application/json")])


Handler = Callable[[Request], Awaitable[Response]]


class LoopbackServer:
    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        # Exceptions raised by the handler: a bug in a fake must fail the test, loudly.
        self.handler_errors: list[BaseException] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> LoopbackServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._server.wait_closed()
        if self.handler_errors and exc is None:
            raise AssertionError("the fake API's handler failed") from self.handler_errors[0]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._connection(reader, writer)
        except (ConnectionError, h11.ProtocolError):
            pass
        except asyncio.CancelledError:
            # Our own shutdown: end quietly (asyncio logs a cancelled connection callback).
            pass
        finally:
            self._tasks.discard(task)
            writer.transport.abort()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            head: h11.Request | None = None
            body = bytearray()
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Request):
                    head = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                    return
            assert head is not None
            request = Request(
                method=head.method.decode(),
                path=head.target.decode(),
                headers={k.decode().lower(): v.decode() for k, v in head.headers},
                body=bytes(body),
            )
            try:
                response = await self._handler(request)
            except Exception as err:
                self.handler_errors.append(err)
                return
            if response.drop:
                return
            headers = [*response.headers, ("content-length", str(len(response.body)))]
            writer.write(conn.send(h11.Response(status_code=response.status, headers=headers)))
            writer.write(conn.send(h11.Data(data=response.body)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"

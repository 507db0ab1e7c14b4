"""Scripting what a fake API answers: the next replies in order, or a standing fault."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from tests.fakes.loopback import Request, Response


@dataclass(frozen=True)
class Fault:
    """An answer other than the normal one. Exactly one of the fields is meant to be set."""

    status: int = 0  # an API error with this HTTP status, in the API's error format
    message: str = ""
    body: Any = None  # a 200 answer with this JSON body instead of the normal one
    raw: bytes | None = None  # a 200 answer with this (non-JSON) body
    hang: bool = False  # never answer (until the server stops)
    drop: bool = False  # close the connection without answering

    @classmethod
    def error(cls, status: int, message: str = "") -> Fault:
        return cls(status=status, message=message or f"fake error {status}")


class Script:
    def __init__(self) -> None:
        self._next: deque[Fault | None] = deque()
        # Applies to every request once the queue is empty (e.g. a provider that is down).
        self.standing: Fault | None = None
        self.requests: list[Request] = []

    def then(self, *faults: Fault | None) -> None:
        """Answer the next requests with these faults in order (``None`` = a normal answer)."""
        self._next.extend(faults)

    def take(self, request: Request) -> Fault | None:
        self.requests.append(request)
        if self._next:
            return self._next.popleft()
        return self.standing

    async def apply(self, fault: Fault, error_body: Any) -> Response:
        if fault.hang:
            await asyncio.Event().wait()
        if fault.drop:
            return Response(drop=True)
        if fault.raw is not None:
            return Response(200, fault.raw, [("content-type", "application/json")])
        if fault.body is not None:
            return Response.of_json(fault.body)
        return Response.of_json(error_body, fault.status)

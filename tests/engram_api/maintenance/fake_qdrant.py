"""A loopback fake of Qdrant's snapshot REST endpoints (create, list, download, delete, upload)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from types import TracebackType

from tests.fakes.loopback import LoopbackServer, Request, Response


@dataclass
class Snap:
    name: str
    data: bytes
    created: str


@dataclass
class FakeQdrantSnapshots:
    api_key: str = "qdrant-test-key"
    # Serve a download that differs from what was announced (a damaged transfer).
    corrupt_downloads: bool = False
    snaps: dict[str, list[Snap]] = field(default_factory=dict)
    uploads: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    server: LoopbackServer = field(init=False)
    _n: int = 0

    def __post_init__(self) -> None:
        self.server = LoopbackServer(self._handle)

    @property
    def url(self) -> str:
        return self.server.url

    async def __aenter__(self) -> FakeQdrantSnapshots:
        await self.server.__aenter__()
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.server.__aexit__(t, e, tb)

    @staticmethod
    def _ok(result: object) -> Response:
        return Response.of_json({"result": result, "status": "ok", "time": 0.0})

    def _desc(self, s: Snap) -> dict[str, object]:
        return {
            "name": s.name,
            "creation_time": s.created,
            "size": len(s.data),
            "checksum": hashlib.sha256(s.data).hexdigest(),
        }

    async def _handle(self, req: Request) -> Response:
        path, _, query = req.path.partition("?")
        m = re.fullmatch(r"/collections/([^/]+)/snapshots(?:/([^/]+))?", path)
        assert m, f"unexpected request {req.method} {req.path}"
        coll, name = m.group(1), m.group(2)
        downloads_or_uploads = name is not None and req.method in ("GET", "POST")
        if downloads_or_uploads and req.headers.get("api-key") != self.api_key:
            return Response.of_json({"status": {"error": "Unauthorized"}}, 401)
        snaps = self.snaps.setdefault(coll, [])
        if req.method == "POST" and name is None:
            self._n += 1
            snap = Snap(
                f"{coll}-{self._n:04d}.snapshot",
                f"snapshot {self._n} of {coll}".encode() * 50,
                f"2026-01-01T00:00:{self._n:02d}",
            )
            snaps.append(snap)
            return self._ok(self._desc(snap))
        if req.method == "GET" and name is None:
            return self._ok([self._desc(s) for s in snaps])
        if req.method == "POST" and name == "upload":
            params = dict(p.split("=", 1) for p in query.split("&") if p)
            self.uploads.append((coll, params, req.body))
            return self._ok(True)
        snap = next((s for s in snaps if s.name == name), None)
        if snap is None:
            return Response.of_json({"status": {"error": "Not found"}}, 404)
        if req.method == "GET":
            body = snap.data + (b"!" if self.corrupt_downloads else b"")
            return Response(
                200,
                body[: len(snap.data)]
                if not self.corrupt_downloads
                else b"X" + body[1 : len(snap.data)],
                [("content-type", "application/octet-stream")],
            )
        if req.method == "DELETE":
            snaps.remove(snap)
            return self._ok(True)
        raise AssertionError(f"unexpected request {req.method} {req.path}")

"""A loopback fake of the Gemini Developer API: ``models/{m}:batchEmbedContents`` and
``models/{m}:generateContent`` under ``/v1`` or ``/v1beta``.

Speaks the wire format google-genai sends and parses, checks the ``x-goog-api-key`` header,
and answers with deterministic vectors (:func:`tests.fakes.vectors.fake_vector`) or a scripted
fault.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from tests.fakes.loopback import LoopbackServer, Request, Response
from tests.fakes.scripted import Script
from tests.fakes.vectors import fake_vector

_VERSIONS = frozenset({"v1", "v1beta"})
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def echo_reply(contents: list[dict[str, Any]]) -> str:
    last = [c for c in contents if c.get("role", "user") == "user"][-1]
    return "echo: " + "".join(p.get("text", "") for p in last["parts"])


class FakeGemini:
    def __init__(
        self,
        *,
        api_key: str = "gm-test-key",
        dimension: int = 3072,
        reply: Callable[[list[dict[str, Any]]], str] = echo_reply,
    ) -> None:
        self.api_key = api_key
        self.dimension = dimension
        self.reply = reply
        self.script = Script()
        self.server = LoopbackServer(self._handle)

    @property
    def base_url(self) -> str:
        return self.server.url

    def bodies(self, method: str) -> list[Any]:
        return [r.json() for r in self.script.requests if r.path.endswith(f":{method}")]

    async def __aenter__(self) -> FakeGemini:
        await self.server.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.server.__aexit__(exc_type, exc, tb)

    @staticmethod
    def _error(status: int, message: str) -> dict[str, Any]:
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _STATUS_NAMES.get(status, "UNKNOWN"),
            }
        }

    async def _handle(self, request: Request) -> Response:
        fault = self.script.take(request)
        if fault is not None:
            return await self.script.apply(fault, self._error(fault.status, fault.message))
        given = request.headers.get("x-goog-api-key", "")
        if given != self.api_key:
            # The real API answers 400 for a bad key; this fake also repeats the key.
            return Response.of_json(
                self._error(400, f"API key not valid: {given}. Please pass a valid API key."),
                status=400,
            )
        path = request.path.split("?", 1)[0]
        version, _, rest = path.removeprefix("/").partition("/")
        if request.method == "POST" and version in _VERSIONS and rest.startswith("models/"):
            model, _, method = rest.removeprefix("models/").rpartition(":")
            if method == "batchEmbedContents":
                return self._embed(request.json())
            if method == "generateContent":
                return self._generate(model, request.json())
        return Response.of_json(self._error(404, f"no route {path}"), status=404)

    def _embed(self, body: dict[str, Any]) -> Response:
        out = []
        for req in body["requests"]:
            text = "".join(p.get("text", "") for p in req["content"]["parts"])
            dim = int(req.get("outputDimensionality") or self.dimension)
            out.append({"values": fake_vector(text, dim)})
        return Response.of_json({"embeddings": out})

    def _generate(self, model: str, body: dict[str, Any]) -> Response:
        text = self.reply(body["contents"])
        prompt = sum(
            len(p.get("text", "").split()) for c in body["contents"] for p in c.get("parts", [])
        )
        completion = len(text.split())
        return Response.of_json(
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": text}], "role": "model"},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": prompt,
                    "candidatesTokenCount": completion,
                    "totalTokenCount": prompt + completion,
                },
                "modelVersion": model,
            }
        )

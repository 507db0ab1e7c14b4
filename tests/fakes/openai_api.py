"""A loopback fake of the OpenAI API: ``POST /v1/embeddings`` and ``POST /v1/chat/completions``.

Speaks the wire format the openai SDK sends and parses, checks the bearer key, and answers
with deterministic vectors (:func:`tests.fakes.vectors.fake_vector`) or a scripted fault.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from types import TracebackType
from typing import Any

from tests.fakes.loopback import LoopbackServer, Request, Response
from tests.fakes.scripted import Script
from tests.fakes.vectors import fake_vector

# What the real models give; any other model name gets the fake's own dimension.
NATIVE = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}


def echo_reply(messages: list[dict[str, Any]]) -> str:
    last = [m for m in messages if m.get("role") == "user"][-1]
    return f"echo: {last['content']}"


class FakeOpenAI:
    def __init__(
        self,
        *,
        api_key: str = "sk-test-key",
        dimension: int = 16,
        reply: Callable[[list[dict[str, Any]]], str] = echo_reply,
    ) -> None:
        self.api_key = api_key
        self.dimension = dimension
        self.reply = reply
        self.script = Script()
        self.server = LoopbackServer(self._handle)

    @property
    def base_url(self) -> str:
        return f"{self.server.url}/v1"

    def bodies(self, path: str) -> list[Any]:
        return [r.json() for r in self.script.requests if r.path == path]

    async def __aenter__(self) -> FakeOpenAI:
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
        return {"error": {"message": message, "type": "fake_error", "param": None, "code": None}}

    async def _handle(self, request: Request) -> Response:
        fault = self.script.take(request)
        if fault is not None:
            return await self.script.apply(fault, self._error(fault.status, fault.message))
        given = request.headers.get("authorization", "").removeprefix("Bearer ")
        if given != self.api_key:
            # Like the real API, the message repeats (part of) the key it was given.
            return Response.of_json(
                self._error(401, f"Incorrect API key provided: {given}"), status=401
            )
        if request.method == "POST" and request.path == "/v1/embeddings":
            return self._embeddings(request.json())
        if request.method == "POST" and request.path == "/v1/chat/completions":
            return self._chat(request.json())
        return Response.of_json(self._error(404, f"no route {request.path}"), status=404)

    def _embeddings(self, body: dict[str, Any]) -> Response:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = int(body.get("dimensions") or NATIVE.get(body["model"], self.dimension))
        data = []
        for i, text in enumerate(texts):
            vec = fake_vector(text, dim)
            emb: Any = vec
            if body.get("encoding_format") == "base64":
                emb = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(len(t.split()) for t in texts)
        return Response.of_json(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def _chat(self, body: dict[str, Any]) -> Response:
        text = self.reply(body["messages"])
        prompt = sum(len(str(m["content"]).split()) for m in body["messages"])
        completion = len(text.split())
        return Response.of_json(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )

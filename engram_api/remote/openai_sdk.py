"""The openai SDK, pointed at any OpenAI-compatible ``base_url`` (OpenAI, vLLM, Ollama, TEI)."""

from __future__ import annotations

import json

import openai

from engram_api.remote.redaction import scrub
from engram_api.resilience import Failure

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (Ollama, vLLM) take no key, but the SDK refuses to start without one.
_NO_KEY = "no-key"


def make_client(*, base_url: str, api_key: str | None, timeout_s: float) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key=api_key or _NO_KEY,
        base_url=base_url or DEFAULT_BASE_URL,
        # Our chain retries with jitter and a breaker; SDK retries would multiply the wait.
        max_retries=0,
        timeout=openai.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
    )


def _server_message(body: object) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("code") or "")
        return str(err)
    if isinstance(body, str | bytes):
        return body if isinstance(body, str) else body.decode("utf-8", "replace")
    return json.dumps(body) if body is not None else ""


def failure_from(exc: Exception, *, secret: str | None) -> Failure:
    """Describe an exception raised by an openai SDK call, with the key scrubbed."""
    secrets = [secret] if secret else []
    if isinstance(exc, openai.APITimeoutError):
        return Failure("timeout", "no answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return Failure("connection", "cannot connect")
    if isinstance(exc, openai.APIStatusError):
        return Failure.from_status(exc.status_code, scrub(_server_message(exc.body), secrets))
    # APIResponseValidationError, JSON errors, missing fields: the server said something odd.
    return Failure("malformed", scrub(f"unusable answer ({type(exc).__name__})", secrets))

"""The google-genai SDK (Gemini Developer API), optionally pointed at another ``base_url``."""

from __future__ import annotations

import asyncio

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from engram_api.remote.redaction import scrub
from engram_api.resilience import Failure


def make_client(*, base_url: str, api_key: str, timeout_s: float) -> genai.Client:
    options = genai_types.HttpOptions(
        base_url=base_url or None,
        # Milliseconds in this SDK.
        timeout=max(1, round(timeout_s * 1000)),
        # One attempt: our chain retries. Without retry_options the SDK also retries
        # connection errors on its own after a 1-10 s sleep.
        retry_options=genai_types.HttpRetryOptions(attempts=1),
        # Always httpx, never aiohttp: the same transport whether or not aiohttp happens to be
        # installed, and no aiohttp subclassing DeprecationWarning on every new session.
        async_client_args={"transport": httpx.AsyncHTTPTransport()},
    )
    return genai.Client(vertexai=False, api_key=api_key, http_options=options)


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | OSError):
        return True
    # aiohttp and httpx are optional transports of the SDK; match by module, not by import.
    module = type(exc).__module__
    return module.startswith(("aiohttp", "httpx", "httpcore"))


def failure_from(exc: Exception, *, secret: str | None) -> Failure:
    """Describe an exception raised by a google-genai call, with the key scrubbed."""
    secrets = [secret] if secret else []
    if isinstance(exc, genai_errors.APIError):
        detail = " ".join(p for p in (exc.status or "", exc.message or "") if p)
        return Failure.from_status(exc.code, scrub(detail, secrets))
    if isinstance(exc, TimeoutError | asyncio.TimeoutError) or "Timeout" in type(exc).__name__:
        return Failure("timeout", "no answer in time")
    if _is_connection_error(exc):
        return Failure("connection", "cannot connect")
    return Failure("malformed", scrub(f"unusable answer ({type(exc).__name__})", secrets))

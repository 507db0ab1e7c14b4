"""`helm test` check for Engram, run inside the Engram image (its venv has the MCP SDK).

Checks, in order:
1. /readyz answers 200.
2. With auth on, an anonymous MCP call is refused with 401.
3. By mode (ENGRAM_TEST_AUTH):
   - off: tools/list over MCP, without a token, names the five memory tools.
   - token: nothing more (agent tokens live in agents' namespaces, not here).
   - kubernetes: the pod's projected ServiceAccount token is bound to an agent by the chart's
     EngramAgent; wait (bounded) until the operator's binding reaches the service, then
     tools/list with that token names the five tools.
   - kubernetes-unbound: no operator binds the token, so the service must check it with
     TokenReview and refuse it with 403 (unbound), not 401 (unrecognised) or 503.

Environment: ENGRAM_TEST_URL (service base URL), ENGRAM_TEST_AUTH, ENGRAM_TEST_TOKEN_FILE,
ENGRAM_TEST_BIND_TIMEOUT_S (default 180), ENGRAM_TEST_POLL_S (default 2). Exit 0 = healthy.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

TOOLS = frozenset({"mem0_add", "mem0_search", "mem0_get_all", "mem0_status", "mem0_maintenance"})
TIMEOUT_S = 15.0


class CheckFailed(Exception):
    """One check failed; the message says which and why."""


def http_status(request: urllib.request.Request) -> int:
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def mcp_status(base: str, token: str) -> int:
    """Status of a bare MCP POST: 401/403 come from authentication, before any MCP parsing."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}})
    request = urllib.request.Request(
        base + "/mcp", data=body.encode(), method="POST", headers=headers
    )
    return http_status(request)


def check_ready(base: str) -> None:
    status = http_status(urllib.request.Request(base + "/readyz"))
    if status != 200:
        raise CheckFailed(f"/readyz answered {status}, expected 200")
    print("ok: /readyz answered 200")


def check_anonymous_refused(base: str) -> None:
    status = mcp_status(base, "")
    if status != 401:
        raise CheckFailed(f"an anonymous MCP call answered {status}, expected 401")
    print("ok: an anonymous MCP call is refused with 401")


def check_unbound_refused(base: str, token: str) -> None:
    status = mcp_status(base, token)
    if status != 403:
        raise CheckFailed(
            f"an unbound ServiceAccount token answered {status}, expected 403 "
            "(401: TokenReview rejected it, check auth.kubernetes.audience; 503: the service "
            "cannot reach the TokenReview API)"
        )
    print("ok: TokenReview accepted the token and the service refused it as unbound (403)")


def wait_until_bound(base: str, token: str, timeout_s: float, poll_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    status = mcp_status(base, token)
    while status == 403 and time.monotonic() < deadline:
        time.sleep(poll_s)
        status = mcp_status(base, token)
    if status in (401, 403):
        raise CheckFailed(
            f"the test ServiceAccount token still answers {status} after {timeout_s:.0f}s "
            "(is the operator running and the test EngramAgent Ready?)"
        )
    print("ok: the test ServiceAccount is bound to an agent")


async def list_tools(base: str, token: str) -> set[str]:
    # Imported here so the checks above run even if the SDK is broken.
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http,
        Client(streamable_http_client(base + "/mcp", http_client=http)) as client,
    ):
        result = await client.list_tools()
    return {tool.name for tool in result.tools}


def check_tools(base: str, token: str) -> None:
    names = asyncio.run(list_tools(base, token))
    missing = sorted(TOOLS - names)
    if missing:
        raise CheckFailed(f"tools/list lacks {', '.join(missing)} (got {sorted(names)})")
    print(f"ok: tools/list names {', '.join(sorted(TOOLS))}")


def read_token() -> str:
    return Path(os.environ["ENGRAM_TEST_TOKEN_FILE"]).read_text(encoding="utf-8").strip()


def main() -> int:
    base = os.environ["ENGRAM_TEST_URL"].rstrip("/")
    auth = os.environ.get("ENGRAM_TEST_AUTH", "kubernetes")
    bind_timeout_s = float(os.environ.get("ENGRAM_TEST_BIND_TIMEOUT_S", "180"))
    poll_s = float(os.environ.get("ENGRAM_TEST_POLL_S", "2"))
    try:
        check_ready(base)
        if auth == "off":
            check_tools(base, "")
            return 0
        check_anonymous_refused(base)
        if auth == "kubernetes":
            token = read_token()
            wait_until_bound(base, token, bind_timeout_s, poll_s)
            check_tools(base, token)
        elif auth == "kubernetes-unbound":
            check_unbound_refused(base, read_token())
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

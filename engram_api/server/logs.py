"""Structured logs: one JSON object per line on stderr, with the request id and the agent.

stdout is the MCP wire in stdio mode, so nothing here ever writes to it. Callers put only
metadata in log records (tool, scope, outcome, ids); memory content, queries and tokens are
never logged at info level or above.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import uuid
from datetime import UTC, datetime
from typing import Any, Final, TextIO

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "engram_request_id", default=None
)
agent_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("engram_agent", default=None)

# Where the HTTP middleware leaves the request id for the tools (they may run in another task).
REQUEST_ID_KEY: Final = "engram.request_id"
_REQUEST_ID_RE: Final = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD: Final = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
    | {"message", "asctime", "taskName", "color_message"}
)


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


def accept_request_id(value: str | None) -> str:
    """A caller's X-Request-Id when it is short and plain, else a fresh one."""
    if value and _REQUEST_ID_RE.fullmatch(value):
        return value
    return new_request_id()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id_var.get()
        agent = agent_var.get()
        if rid is not None:
            out["request_id"] = rid
        if agent is not None:
            out["agent"] = agent
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(level: str = "INFO", stream: TextIO | None = None) -> None:
    """Route every logger (ours, uvicorn's, the SDK's) through one JSON handler on stderr."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # The SDK logs every request and every failed tool call at info; our own line per call
    # says the same with the request id and agent, so keep theirs for debugging only.
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    for name in ("mcp", "httpx", "httpx2", "uvicorn.access", "kubernetes", "urllib3"):
        logging.getLogger(name).setLevel(quiet)

"""What every tool call goes through: identity, then the engine, then one log line and metrics.

Engine errors become MCP tool errors (``isError``) whose text names the field and the rule, so
the model can correct the call. Anything unexpected is logged with its traceback and answered
with a generic message carrying the request id, never internal details.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from engram_api.errors import EngramError, PermissionDenied, Unavailable
from engram_api.memory.service import MemoryService, check_agent
from engram_api.runtime import Engine
from engram_api.server.auth import IDENTITY_KEY, Identity
from engram_api.server.logs import REQUEST_ID_KEY, agent_var, new_request_id, request_id_var
from engram_api.server.metrics import Metrics
from engram_contract.scopes import ID_RE, is_scope

log = logging.getLogger("engram_api.server.calls")

Transport = Literal["http", "stdio"]
Operation = Callable[[str], Awaitable[dict[str, Any]]]


class AgentMismatch(PermissionDenied):
    kind = "agent_mismatch"


def _loggable_scope(scope: str) -> str:
    """The scope for the log line; anything that is not a scope is not echoed (it is caller
    text, and callers have been known to paste content into the wrong argument)."""
    scope = scope.strip()
    if is_scope(scope) or scope == "all":
        return scope
    if scope.startswith("cross:") and ID_RE.fullmatch(scope[len("cross:") :]):
        return scope
    return "(invalid)"


def format_error(exc: EngramError) -> str:
    message = exc.message
    if exc.field and not message.startswith(f"{exc.field}:"):
        message = f"{exc.field}: {message}"
    return f"{message} ({exc.kind})"


class ToolRuntime:
    """Shared by the tools of one server; the engine is attached once it is open."""

    def __init__(
        self, *, metrics: Metrics, transport: Transport, default_agent: str = "main"
    ) -> None:
        self.metrics = metrics
        self.transport = transport
        self.default_agent = default_agent
        self.engine: Engine | None = None

    def require_engine(self) -> Engine:
        if self.engine is None:
            raise Unavailable("Engram is starting; retry in a moment")
        return self.engine

    @property
    def service(self) -> MemoryService:
        return self.require_engine().service

    def _request_scope(self, ctx: Context[Any, Any]) -> dict[str, Any] | None:
        try:
            request = ctx.request_context.request
        except ValueError:
            return None  # a call made in process, outside any request
        scope = getattr(request, "scope", None)
        return scope if isinstance(scope, dict) else None

    def identity(self, ctx: Context[Any, Any]) -> Identity:
        scope = self._request_scope(ctx)
        if scope is None:
            # stdio: whoever launched the process owns the data dir; trust the argument.
            return Identity(method="local")
        found = scope.get(IDENTITY_KEY)
        if not isinstance(found, Identity):
            # The HTTP app always authenticates first; failing closed if that ever breaks.
            raise PermissionDenied("request was not authenticated", field="agent")
        return found

    def resolve_agent(self, identity: Identity, requested: str | None) -> str:
        requested = (requested or "").strip() or None
        if identity.agent is None:
            return check_agent(requested or self.default_agent)
        if requested is not None and requested != identity.agent:
            raise AgentMismatch(
                f"agent: this connection is authenticated as agent '{identity.agent}'; omit "
                f"agent or pass '{identity.agent}'",
                field="agent",
            )
        return identity.agent

    async def call(
        self,
        tool: str,
        ctx: Context[Any, Any],
        agent: str | None,
        op: Operation,
        *,
        scope: str | None = None,
    ) -> dict[str, Any]:
        req_scope = self._request_scope(ctx)
        rid = (req_scope or {}).get(REQUEST_ID_KEY) or new_request_id()
        rid_token = request_id_var.set(rid)
        agent_token = agent_var.set(None)
        started = time.perf_counter()
        outcome = "ok"
        error = ""
        identity: Identity | None = None
        try:
            identity = self.identity(ctx)
            who = self.resolve_agent(identity, agent)
            agent_var.set(who)
            result = await op(who)
            if result.get("queued"):
                outcome = "queued"
            return result
        except EngramError as exc:
            outcome, error = exc.kind, format_error(exc)
            raise ToolError(error) from None
        except Exception:
            outcome = "internal"
            log.exception("tool failed", extra={"tool": tool})
            raise ToolError(
                f"internal error (request id {rid}); the server log has the details"
            ) from None
        finally:
            self._record(tool, rid, outcome, started, identity=identity, scope=scope, error=error)
            agent_var.reset(agent_token)
            request_id_var.reset(rid_token)

    def reject_arguments(self, tool: str, ctx: Context[Any, Any] | None, problem: str) -> str:
        """Count and log a call whose arguments never reached the tool; the error text."""
        started = time.perf_counter()
        req_scope = self._request_scope(ctx) if ctx is not None else None
        rid = (req_scope or {}).get(REQUEST_ID_KEY) or new_request_id()
        error = f"{problem} (invalid_input)"
        self._record(tool, rid, "invalid_input", started, identity=None, scope=None, error=error)
        return error

    def _record(
        self,
        tool: str,
        rid: str,
        outcome: str,
        started: float,
        *,
        identity: Identity | None,
        scope: str | None,
        error: str,
    ) -> None:
        elapsed = time.perf_counter() - started
        failed = outcome not in ("ok", "queued")
        self.metrics.observe_call(tool, outcome, elapsed, error=failed)
        fields: dict[str, Any] = {
            "request_id": rid,
            "agent": agent_var.get(),
            "tool": tool,
            "outcome": outcome,
            "duration_ms": round(elapsed * 1000, 2),
            "transport": self.transport,
            "auth": identity.method if identity else "none",
        }
        if identity is not None and identity.subject:
            fields["subject"] = identity.subject
        if scope:
            fields["scope"] = _loggable_scope(scope)
        if error:
            fields["error"] = error
        log.info("tool call", extra=fields)

"""The HTTP service: MCP over streamable HTTP at /mcp, plus /healthz and /readyz; /metrics on a
port of its own (:class:`MetricsListener`).

MCP runs stateless with JSON responses, so every request stands alone and any replica can
answer it: replicas share only the Qdrant server and the permission config. The engine is
opened in the lifespan through :func:`engram_api.runtime.open_engine`, the same composition
root the CLI and the stdio server use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram_api import __version__
from engram_api.control import Handler, serve_control
from engram_api.runtime import Engine, load_permissions, open_engine
from engram_api.server.auth import (
    Authenticator,
    AuthMiddleware,
    Identity,
    check_bind_safety,
    is_loopback,
)
from engram_api.server.calls import ToolRuntime
from engram_api.server.logs import REQUEST_ID_KEY, accept_request_id, request_id_var
from engram_api.server.metrics import CONTENT_TYPE, Metrics
from engram_api.server.readiness import EmbedderProbe, readiness
from engram_api.server.reload import PermissionWatcher
from engram_api.server.tools import build_mcp
from engram_api.settings import EngramSettings, ServerSettings
from engram_contract.permissions import Operation

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
_LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def transport_security(s: ServerSettings) -> TransportSecuritySettings:
    """Host/Origin checks against DNS rebinding (browsers reaching a local server)."""
    if s.allowed_hosts or s.allowed_origins:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=s.allowed_hosts or list(_LOOPBACK_HOSTS),
            allowed_origins=s.allowed_origins,
        )
    if is_loopback(s.host):
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(_LOOPBACK_HOSTS),
            allowed_origins=list(_LOOPBACK_ORIGINS),
        )
    # Beyond loopback the names clients use are unknown (Service DNS, ingress hosts) and a
    # bearer token is required anyway; set allowed_hosts to check them too.
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


class RequestIdMiddleware:
    """Gives every request an id (the caller's X-Request-Id when sane) and echoes it back."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = accept_request_id(Headers(scope=scope).get("x-request-id"))
        scope[REQUEST_ID_KEY] = rid
        token = request_id_var.set(rid)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["x-request-id"] = rid
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)


class StatelessOnly:
    """In stateless mode there is no session and nothing to stream: GET /mcp (an SSE stream a
    caller could hold open indefinitely) is refused with 405 before authentication."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and scope["path"].rstrip("/") == MCP_PATH
        ):
            response = JSONResponse(
                {
                    "error": "method_not_allowed",
                    "error_description": "this MCP server is stateless: send JSON-RPC "
                    "requests with POST; there is no event stream to GET",
                },
                status_code=405,
                headers={"Allow": "POST"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class ServerState:
    def __init__(self, settings: EngramSettings, metrics: Metrics, runtime: ToolRuntime) -> None:
        self.settings = settings
        self.metrics = metrics
        self.runtime = runtime
        self.engine: Engine | None = None
        self.watcher: PermissionWatcher | None = None
        self.probe: EmbedderProbe | None = None
        self.authenticator: Authenticator | None = None
        # The local port of the metrics listener (whoever binds it sets it; 0: none).
        self.metrics_port = settings.server.metrics_port


class MetricsListener:
    """/metrics answers on the metrics port only, and that port answers nothing else.

    One app serves both listeners (one lifespan, one engine); requests are told apart by the
    local port they arrived on, so /metrics is never reachable through the MCP port (or an
    Ingress in front of it)."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        server = scope.get("server") or ("", 0)
        on_metrics_port = bool(self.state.metrics_port) and server[1] == self.state.metrics_port
        response: Response
        if on_metrics_port and scope["path"] == "/metrics" and scope["method"] == "GET":
            engine = self.state.engine
            if engine is not None:
                _, body = await readiness(engine, self.state.probe, self.state.watcher)
                self.state.metrics.observe_degraded(body["degraded"])
                await self.state.metrics.refresh(engine.store, engine.queue)
            response = Response(self.state.metrics.render(), media_type=CONTENT_TYPE)
        elif on_metrics_port or scope["path"] == "/metrics":
            response = JSONResponse(
                {"error": "not_found", "error_description": "/metrics has a port of its own"}
                if not on_metrics_port
                else {"error": "not_found", "error_description": "this port serves /metrics"},
                status_code=404,
            )
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)


def create_app(
    settings: EngramSettings,
    *,
    default_agent: str = "main",
    control_handlers: Mapping[str, Handler] | None = None,
) -> FastAPI:
    """Build the app; raises StartupError when the bind would be open to anyone.

    ``control_handlers``: CLI commands this process runs for an ``engram`` started beside it
    (:mod:`engram_api.control`).
    """
    s = settings.server
    config = load_permissions(settings.permissions_file)
    check_bind_safety(settings, config)
    if any(p.service_accounts for p in config.agents.values()) and not (
        settings.kubernetes_auth.enabled
    ):
        log.warning(
            "the permission config binds ServiceAccounts but kubernetes_auth.enabled is false; "
            "ServiceAccount tokens will be refused"
        )
    metrics = Metrics(
        max_scopes=s.metrics_max_scopes,
        cache_s=s.metrics_cache_s,
        scope_names=s.metrics_scope_labels == "name",
    )
    runtime = ToolRuntime(metrics=metrics, transport="http", default_agent=default_agent)
    state = ServerState(settings, metrics, runtime)
    mcp = build_mcp(runtime)
    mcp_http = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=s.max_request_bytes,
        transport_security=transport_security(s),
        host=s.host,
    )
    guarded = AuthMiddleware(mcp_http, authenticator=None, metrics=metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            open_engine(
                settings,
                holder=f"engram serve at http://{s.host}:{s.port}{MCP_PATH}",
                control=control_handlers is not None,
            ) as engine,
            serve_control(engine, settings.data_dir, control_handlers)
            if control_handlers is not None
            else contextlib.nullcontext(),
        ):
            policy = engine.service.policy
            authenticator = Authenticator(settings, policy)
            if authenticator.reviewer is not None:
                await asyncio.to_thread(authenticator.reviewer.prepare)
            watcher = PermissionWatcher(
                settings.permissions_file, policy, metrics, interval_s=s.permissions_poll_s
            )
            watcher.prime()
            state.engine, state.watcher = engine, watcher
            state.probe = EmbedderProbe(engine.service.embedder, ttl_s=s.readiness_probe_ttl_s)
            runtime.engine = engine
            guarded.authenticator = state.authenticator = authenticator
            watcher.start()
            try:
                async with mcp.session_manager.run():
                    log.info(
                        "engram serving MCP",
                        extra={
                            "path": MCP_PATH,
                            "auth": "token" if authenticator.requires_token() else "local",
                            "kubernetes_auth": settings.kubernetes_auth.enabled,
                            "store": engine.store.kind,
                            "embedding_model": engine.embedder.model_id,
                        },
                    )
                    yield
            finally:
                guarded.authenticator = state.authenticator = None
                runtime.engine = None
                state.engine = None
                await watcher.stop()
                authenticator.close()

    app = FastAPI(
        title="Engram",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.engram = state

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        ready, body = await readiness(state.engine, state.probe, state.watcher)
        metrics.observe_degraded(body["degraded"])
        if not await may_see_readiness_detail(state, request.headers.get("authorization")):
            body = {"ready": ready}
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/.well-known/{name:path}")
    async def no_oauth_discovery(name: str) -> JSONResponse:
        # Clients probe OAuth discovery first; a JSON 404 tells them there is none, so they
        # send the bearer token they were configured with.
        return JSONResponse(
            {
                "error": "not_found",
                "error_description": "Engram uses bearer tokens from its permission config, "
                "not OAuth; configure the client with an Authorization header",
            },
            status_code=404,
        )

    app.mount("/", StatelessOnly(guarded))
    app.add_middleware(MetricsListener, state=state)
    app.add_middleware(RequestIdMiddleware)
    return app


async def may_see_readiness_detail(state: ServerState, authorization: str | None) -> bool:
    """Probes get ready or not; the parts (store, embedder, permission file, queue) only go to
    a bearer token of an agent allowed ``status``."""
    auth, engine = state.authenticator, state.engine
    if not authorization or auth is None or engine is None or not auth.requires_token():
        return False
    who = await auth.authenticate(authorization)
    if not isinstance(who, Identity) or who.agent is None:
        return False
    return Operation.status in engine.service.policy.policy_for(who.agent).operations

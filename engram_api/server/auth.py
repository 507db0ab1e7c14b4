"""Who is calling: local trust, agent tokens, or Kubernetes ServiceAccount tokens.

Modes, decided on every request from the permission config that is active right then:

- token: the config lists token hashes or ServiceAccount bindings, or Kubernetes auth is on,
  or the server listens beyond loopback. Every request needs ``Authorization: Bearer``.
- local: none of the above (a loopback bind, or ``--insecure-no-auth``). The ``agent`` tool
  argument is trusted.

So a reload that removes every credential from a server bound beyond loopback locks it rather
than opening it.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from dataclasses import dataclass
from typing import Final, Literal

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from engram_api.memory.policy import PolicyEngine
from engram_api.runtime import StartupError
from engram_api.server.metrics import Metrics
from engram_api.server.tokenreview import TokenReviewer, TokenReviewUnavailable
from engram_api.settings import EngramSettings
from engram_contract.permissions import PermissionConfig, ServiceAccountRef, hash_token

log = logging.getLogger(__name__)

IDENTITY_KEY: Final = "engram.identity"
Method = Literal["local", "token", "serviceaccount"]


@dataclass(frozen=True)
class Identity:
    """The authenticated caller. ``agent`` is None in local mode: the tool argument decides."""

    method: Method
    agent: str | None = None
    # For logs: "team-a/bot" for a ServiceAccount, empty otherwise.
    subject: str = ""


@dataclass(frozen=True)
class Refusal:
    status: int
    error: str
    description: str
    reason: str  # metrics label


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind_safety(settings: EngramSettings, config: PermissionConfig) -> None:
    """Refuse to serve a non-loopback address with nothing to check callers against."""
    s = settings.server
    if is_loopback(s.host) or s.insecure_no_auth:
        return
    if settings.kubernetes_auth.enabled or config.uses_tokens():
        return
    raise StartupError(
        f"server.host={s.host} is not a loopback address and no authentication is configured: "
        "add token_sha256 or service_accounts to an agent in the permission file "
        "(`engram token create <agent>` makes a token), enable kubernetes_auth "
        "(ENGRAM_KUBERNETES_AUTH__ENABLED=true), or pass --insecure-no-auth "
        "(ENGRAM_SERVER__INSECURE_NO_AUTH=true) to trust the agent argument from anyone "
        "who can reach the port"
    )


def agent_for_token(config: PermissionConfig, token: str) -> str | None:
    """The agent holding this token. Every stored hash is compared, in constant time each."""
    digest = hash_token(token)
    found: str | None = None
    for name, policy in config.agents.items():
        for stored in policy.token_sha256:
            if hmac.compare_digest(digest, stored) and found is None:
                found = name
    return found


def agent_for_service_account(config: PermissionConfig, namespace: str, name: str) -> str | None:
    ref = ServiceAccountRef(namespace=namespace, name=name)
    for agent, policy in config.agents.items():
        if ref in policy.service_accounts:
            return agent
    return None


class Authenticator:
    def __init__(
        self,
        settings: EngramSettings,
        policy: PolicyEngine,
        *,
        reviewer: TokenReviewer | None = None,
    ) -> None:
        self._policy = policy
        self._trust_local = is_loopback(settings.server.host) or settings.server.insecure_no_auth
        self._kubernetes = settings.kubernetes_auth.enabled
        if self._kubernetes and reviewer is None:
            reviewer = TokenReviewer(settings.kubernetes_auth)
        self.reviewer = reviewer

    def requires_token(self) -> bool:
        if self._kubernetes or self._policy.config.uses_tokens():
            return True
        return not self._trust_local

    async def authenticate(self, authorization: str | None) -> Identity | Refusal:
        if not self.requires_token():
            return Identity(method="local")
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Refusal(
                401,
                "",
                "this Engram server needs 'Authorization: Bearer <token>' (an agent token or, "
                "in Kubernetes, a ServiceAccount token)",
                "missing",
            )
        config = self._policy.config
        agent = agent_for_token(config, token)
        if agent is not None:
            return Identity(method="token", agent=agent)
        if self.reviewer is None:
            return Refusal(401, "invalid_token", "the token is not recognised", "unknown_token")
        try:
            review = await self.reviewer.review(token)
        except TokenReviewUnavailable as exc:
            log.error("cannot check a ServiceAccount token", extra={"error": str(exc)})
            return Refusal(
                503,
                "temporarily_unavailable",
                "the Kubernetes API could not check this token; retry shortly",
                "tokenreview_unavailable",
            )
        if not review.authenticated:
            log.warning("bearer token refused", extra={"reason": review.reason})
            return Refusal(401, "invalid_token", "the token is not recognised", "unknown_token")
        # The config may have changed while the API call ran; bind with the current one.
        bound = agent_for_service_account(self._policy.config, review.namespace, review.name)
        subject = f"{review.namespace}/{review.name}"
        if bound is None:
            return Refusal(
                403,
                "insufficient_scope",
                f"ServiceAccount {subject} is not bound to an Engram agent; list it under an "
                "agent's service_accounts (EngramAgent spec.identity.serviceAccounts)",
                "unbound_service_account",
            )
        return Identity(method="serviceaccount", agent=bound, subject=subject)

    def close(self) -> None:
        if self.reviewer is not None:
            self.reviewer.close()


class AuthMiddleware:
    """Guards the MCP endpoint; records the identity in the ASGI scope for the tools.

    Refusals carry an RFC 6750 challenge without ``resource_metadata``: Engram's tokens are
    static bearer tokens, not OAuth, and clients that find OAuth discovery metadata (Cursor,
    Claude Code) start an OAuth flow instead of sending the header they were configured with.
    """

    def __init__(
        self, app: ASGIApp, *, authenticator: Authenticator | None, metrics: Metrics
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.authenticator is None:
            await _json(send, 503, {"error": "starting", "error_description": "Engram is starting"})
            return
        outcome = await self.authenticator.authenticate(Headers(scope=scope).get("authorization"))
        if isinstance(outcome, Refusal):
            self.metrics.auth_failures.labels(reason=outcome.reason).inc()
            log.warning(
                "request refused",
                extra={"status": outcome.status, "reason": outcome.reason, "path": scope["path"]},
            )
            await self._refuse(send, outcome)
            return
        scope[IDENTITY_KEY] = outcome
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, r: Refusal) -> None:
        params = ['realm="engram"']
        if r.error:
            params.append(f'error="{r.error}"')
            params.append(f'error_description="{r.description}"')
        headers = [(b"www-authenticate", ("Bearer " + ", ".join(params)).encode())]
        if r.status == 503:
            headers = [(b"retry-after", b"5")]
        body = {"error": r.error or "unauthorized", "error_description": r.description}
        await _json(send, r.status, body, headers)


async def _json(
    send: Send, status: int, body: dict[str, str], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})

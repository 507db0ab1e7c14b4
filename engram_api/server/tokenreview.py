"""Kubernetes ServiceAccount tokens, checked with the TokenReview API.

The official ``kubernetes`` client is synchronous, so each review runs in a worker thread.
Answers are cached for a short while by the token's SHA-256 (never the token itself), and
concurrent checks of one token share a single API call. API outages are not cached: the
caller answers 503 and the client retries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from engram_api.runtime import StartupError
from engram_api.settings import KubernetesAuthSettings
from engram_contract.permissions import hash_token

log = logging.getLogger(__name__)

SA_PREFIX: Final = "system:serviceaccount:"


class TokenReviewUnavailable(RuntimeError):
    """The API server could not be asked; the token is neither accepted nor rejected."""


@dataclass(frozen=True)
class Review:
    authenticated: bool
    namespace: str = ""
    name: str = ""
    # Why a token was refused, for logs (never the token).
    reason: str = ""


def parse_username(username: str) -> tuple[str, str] | None:
    """``system:serviceaccount:<ns>:<name>`` → (ns, name); other users are not ServiceAccounts."""
    if not username.startswith(SA_PREFIX):
        return None
    parts = username[len(SA_PREFIX) :].split(":")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]


def _api_client(settings: KubernetesAuthSettings) -> Any:
    from kubernetes import client
    from kubernetes import config as kube_config

    # The config loaders carry no type hints.
    config: Any = kube_config
    cfg = client.Configuration()
    if settings.api_url:
        cfg.host = settings.api_url
    else:
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException:
            # Outside a cluster (development): the current kubeconfig context.
            config.load_kube_config(client_configuration=cfg)
    return client.ApiClient(cfg)


class TokenReviewer:
    def __init__(
        self,
        settings: KubernetesAuthSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, Review]] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[Review]] = {}
        self._api: Any = None
        self.api_calls = 0

    def prepare(self) -> None:
        """Load the Kubernetes client configuration now, so a bad one stops the start-up."""
        try:
            self._authentication_api()
        except Exception as exc:
            where = self._settings.api_url or "the in-cluster configuration or ~/.kube/config"
            raise StartupError(
                f"kubernetes_auth.enabled: cannot set up the Kubernetes client from {where} "
                f"({type(exc).__name__}: {exc}); run in a pod with a ServiceAccount, or set "
                "kubernetes_auth.api_url (ENGRAM_KUBERNETES_AUTH__API_URL)"
            ) from None

    def _authentication_api(self) -> Any:
        from kubernetes import client

        if self._api is None:
            self._api = client.AuthenticationV1Api(_api_client(self._settings))
        return self._api

    async def review(self, token: str) -> Review:
        key = hash_token(token)
        cached = self._cache.get(key)
        if cached is not None:
            expires, result = cached
            if self._clock() < expires:
                self._cache.move_to_end(key)
                return result
            del self._cache[key]
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[Review] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            result = await asyncio.to_thread(self._review_blocking, token)
        except BaseException as exc:
            # Waiters get an outage, not our cancellation; mark it retrieved since there may be
            # no waiter at all.
            shared = exc if isinstance(exc, Exception) else TokenReviewUnavailable("interrupted")
            fut.set_exception(shared)
            fut.exception()
            raise
        finally:
            del self._inflight[key]
        fut.set_result(result)
        self._remember(key, result)
        return result

    def _remember(self, key: str, result: Review) -> None:
        limit = self._settings.cache_max_entries
        if limit <= 0 or self._settings.cache_ttl_s <= 0:
            return
        self._cache[key] = (self._clock() + self._settings.cache_ttl_s, result)
        self._cache.move_to_end(key)
        while len(self._cache) > limit:
            self._cache.popitem(last=False)

    def _review_blocking(self, token: str) -> Review:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        audience = self._settings.audience
        body = client.V1TokenReview(
            api_version="authentication.k8s.io/v1",
            kind="TokenReview",
            spec=client.V1TokenReviewSpec(token=token, audiences=[audience] if audience else None),
        )
        self.api_calls += 1
        try:
            answer = self._authentication_api().create_token_review(
                body, _request_timeout=self._settings.timeout_s
            )
        except ApiException as exc:
            # 4xx other than auth problems of our own would mean a malformed request; either
            # way the token cannot be judged now.
            raise TokenReviewUnavailable(
                f"TokenReview API answered {exc.status} {exc.reason}"
            ) from None
        except Exception as exc:
            raise TokenReviewUnavailable(
                f"TokenReview API unreachable: {type(exc).__name__}"
            ) from None
        status = answer.status
        if status is None or not status.authenticated:
            reason = (status.error if status is not None else "") or "not authenticated"
            return Review(False, reason=reason)
        if audience and audience not in (status.audiences or []):
            return Review(False, reason=f"token is not meant for audience {audience!r}")
        user = status.user
        parsed = parse_username(user.username or "") if user is not None else None
        if parsed is None:
            return Review(False, reason="token does not belong to a ServiceAccount")
        return Review(True, namespace=parsed[0], name=parsed[1])

    def close(self) -> None:
        if self._api is not None:
            self._api.api_client.close()
            self._api = None

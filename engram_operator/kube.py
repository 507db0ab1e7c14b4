"""A small async Kubernetes client over ``kubernetes.aio``'s transport, speaking plain dicts.

The generated typed API classes are skipped on purpose: the operator reads and writes a handful
of object shapes as JSON, patches are always JSON merge patches (the generated client defaults a
dict body to strategic merge, which custom resources refuse), and errors carry only the server's
message — never a request body, which for Secrets would contain a token.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from kubernetes.aio.client import ApiClient, Configuration

from engram_operator.naming import AGENTS, GROUP, MAINTENANCES, VERSION

MERGE_PATCH: Final = "application/merge-patch+json"
REQUEST_TIMEOUT_S: Final = 30.0
# The server ends each watch after this long; the client waits a little longer before giving up.
WATCH_SECONDS: Final = 300
# Refusals that repeating the same request cannot change: a bad object (400, 422), missing
# rights (403, until someone changes RBAC), a namespace being deleted. Retried by the resync,
# never in a tight loop.
PERMANENT_STATUSES: Final = frozenset({400, 403, 422})


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        parts = ["/api", self.version] if not self.group else ["/apis", self.group, self.version]
        if namespace:
            parts += ["namespaces", quote(namespace, safe="")]
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


CONFIGMAPS: Final = Kind("", "v1", "configmaps")
SECRETS: Final = Kind("", "v1", "secrets")
PODS: Final = Kind("", "v1", "pods")
CRONJOBS: Final = Kind("batch", "v1", "cronjobs")
JOBS: Final = Kind("batch", "v1", "jobs")
EVENTS: Final = Kind("", "v1", "events")
ENGRAM_AGENTS: Final = Kind(GROUP, VERSION, AGENTS)
ENGRAM_MAINTENANCES: Final = Kind(GROUP, VERSION, MAINTENANCES)


class KubeError(Exception):
    def __init__(self, method: str, path: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        # The server's own explanation (never a request body, which may hold a token).
        self.message = message

    @property
    def permanent(self) -> bool:
        return self.status in PERMANENT_STATUSES

    def describe(self) -> str:
        """For a condition: the server's reason and message, without the URL."""
        return f"{self.reason or 'HTTP ' + str(self.status)}: {self.message}".rstrip(": ")


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


class KubeApi:
    def __init__(self, configuration: Configuration) -> None:
        # The generated client is untyped where we use it; keep it behind this class.
        self._client: Any = ApiClient(configuration)

    async def close(self) -> None:
        await self._client.close()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        _, url, headers, body, _ = await self._client.param_serialize(
            method,
            path,
            query_params=query or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = await self._client.call_api(
            method, url, headers, body, _request_timeout=REQUEST_TIMEOUT_S
        )
        raw = await response.read()
        status = int(response.status)
        if 200 <= status < 300:
            return json.loads(raw) if raw else {}
        reason, message = str(response.reason or ""), ""
        try:
            failure = json.loads(raw)
            reason = str(failure.get("reason") or reason)
            message = str(failure.get("message") or "")
        except (ValueError, AttributeError):
            message = raw[:200].decode("utf-8", "replace")
        error = {404: NotFound, 409: Conflict}.get(status, KubeError)
        raise error(method, path, status, reason, message)

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self._request("GET", kind.path(namespace, name))
        except NotFound:
            return None
        return obj

    async def list_objects(
        self, kind: Kind, namespace: str | None, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        return list((await self.list_page(kind, namespace, label_selector=label_selector))[0])

    async def list_page(
        self, kind: Kind, namespace: str | None, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The objects and the list's resourceVersion (where a watch starts)."""
        query = [("labelSelector", label_selector)] if label_selector else None
        result = await self._request("GET", kind.path(namespace), query=query)
        version = str((result.get("metadata") or {}).get("resourceVersion") or "")
        return list(result.get("items") or []), version

    async def watch(
        self,
        kind: Kind,
        namespace: str | None,
        *,
        label_selector: str,
        resource_version: str,
        seconds: int = WATCH_SECONDS,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events ({"type", "object"}) until the server ends the stream."""
        query = [
            ("watch", "true"),
            ("labelSelector", label_selector),
            ("timeoutSeconds", str(seconds)),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        _, url, headers, _, _ = await self._client.param_serialize(
            "GET",
            kind.path(namespace),
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        response = await self._client.call_api(
            "GET", url, headers, None, _request_timeout=seconds + REQUEST_TIMEOUT_S
        )
        raw = response.response
        try:
            if not 200 <= int(response.status) < 300:
                await response.read()
                raise KubeError("WATCH", kind.path(namespace), int(response.status), "", "")
            async for line in raw.content:
                if line.strip():
                    yield json.loads(line)
        finally:
            raw.release()

    async def create(
        self, kind: Kind, namespace: str | None, body: dict[str, Any]
    ) -> dict[str, Any]:
        created: dict[str, Any] = await self._request("POST", kind.path(namespace), body=body)
        return created

    async def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        patched: dict[str, Any] = await self._request(
            "PATCH", kind.path(namespace, name, subresource), body=body, content_type=MERGE_PATCH
        )
        return patched

    async def delete(self, kind: Kind, namespace: str | None, name: str) -> bool:
        """Delete; False if it was already gone."""
        try:
            await self._request("DELETE", kind.path(namespace, name))
        except NotFound:
            return False
        return True

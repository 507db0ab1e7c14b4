"""Glue for running the real operator against kmock, an in-process Kubernetes API emulator.

kmock stores objects and serves list/watch/get/create/patch/delete, but does not fill in what a
real API server would (uid, resourceVersion, generation, namespace, apiVersion/kind), does not
apply label selectors, and collects no garbage. ``StampingEmulator`` adds the stamping; the
operator filters by owner itself, and tests that need garbage collection say so.

The operator runs in its own thread and event loop (as it would in its own process): kopf run
in the test's loop would count pytest's own tasks as its "hung" tasks and wait 5 s for them on
every teardown. The test's loop keeps serving kmock, so tests only ``await``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp.web
import jsonpatch
import kmock
import kopf
from kmock._internal import enums
from kubernetes.aio.client import Configuration

from engram_operator import rbac
from engram_operator.kube import Kind, KubeApi
from engram_operator.naming import AGENT_KIND, AGENTS, GROUP, MAINTENANCE_KIND, MAINTENANCES
from engram_operator.runner import run
from engram_operator.settings import OperatorSettings

T = TypeVar("T")
OPERATOR_NS = "engram"
HOOK_TOKEN = "uninstall-hook"
# spec.release of the tests' resources: the release make_settings() serves.
RELEASE_REF = f"{OPERATOR_NS}/engram"
IMAGE = "registry.example/engram:1.2.3"
_resource_versions = itertools.count(1)
ALL_VERBS = {"list", "watch", "get", "create", "patch", "delete"}

# (group/version/plural, kind, namespaced, subresources)
RESOURCES: list[tuple[str, str, bool, set[str]]] = [
    (f"{GROUP}/v1alpha1/{AGENTS}", AGENT_KIND, True, {"status"}),
    (f"{GROUP}/v1alpha1/{MAINTENANCES}", MAINTENANCE_KIND, True, {"status"}),
    ("v1/configmaps", "ConfigMap", True, set()),
    ("v1/secrets", "Secret", True, set()),
    ("v1/pods", "Pod", True, set()),
    ("v1/events", "Event", True, set()),
    ("v1/namespaces", "Namespace", False, set()),
    ("batch/v1/cronjobs", "CronJob", True, set()),
    ("batch/v1/jobs", "Job", True, {"status"}),
    ("apiextensions.k8s.io/v1/customresourcedefinitions", "CustomResourceDefinition", False, set()),
]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Rejection:
    """An API-server refusal the emulator plays for matching operator requests."""

    method: str
    path_suffix: str
    status: int
    reason: str
    message: str
    # Only requests whose body contains this text (e.g. a field value); "" = any.
    body_contains: str = ""


def _status_response(status: int, reason: str, message: str) -> Any:
    return aiohttp.web.json_response(
        {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "code": status,
            "reason": reason,
            "message": message,
        },
        status=status,
    )


class StampingEmulator(kmock.KubernetesEmulator):
    """kmock plus what an API server fills in on create, and ``generation`` bumps on spec
    changes (so observedGeneration can be tested).

    Two refusals a real API server makes can be played too: ``rejections`` (a 422 on a field
    value, a 403 in one namespace) and ``enforce`` (RBAC: operator requests outside these
    permissions get 403 Forbidden, as their ServiceAccount's would).
    """

    rejections: list[Rejection]
    enforce: set[rbac.Permission] | None = None

    def refuse(self, request: Any) -> Any | None:
        if str(request.headers.get("User-Agent", "")).startswith("kmock/"):
            return None  # the test itself
        for rejection in getattr(self, "rejections", []):
            if (
                request.method.value.upper() == rejection.method
                and request.url.path.endswith(rejection.path_suffix)
                and rejection.body_contains in json.dumps(request.data)
            ):
                return _status_response(rejection.status, rejection.reason, rejection.message)
        permission = permission_of(request)
        if (
            self.enforce is not None
            and permission is not None
            and not rbac.allows(self.enforce, permission)
        ):
            ns, group, resource, verb, name = permission
            where = f'in the namespace "{ns}"' if ns else "at the cluster scope"
            return _status_response(
                403,
                "Forbidden",
                f'{resource} "{name or ""}" is forbidden: User "system:serviceaccount:'
                f'engram:engram-operator" cannot {verb} resource "{resource}" in API '
                f'group "{group}" {where}',
            )
        return None

    async def _handle(self, request: Any) -> Any:
        refused = self.refuse(request)
        if refused is not None:
            return refused
        if request.resource is not None and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            if request.action == enums.action.CREATE:
                res = request.resource
                request.data.setdefault(
                    "apiVersion", f"{res.group}/{res.version}" if res.group else res.version
                )
                if res in self.resources and self.resources[res].kind:
                    request.data.setdefault("kind", self.resources[res].kind)
                if request.namespace:
                    meta.setdefault("namespace", request.namespace)
                if "name" not in meta and "generateName" in meta:
                    meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("generation", 1)
                meta.setdefault("creationTimestamp", _now())
                meta["resourceVersion"] = str(next(_resource_versions))
            elif request.action == enums.action.UPDATE:
                meta["resourceVersion"] = str(next(_resource_versions))
                if "spec" in request.data and not request.subresource:
                    key = (request.resource, request.namespace, request.name)
                    if key in self.objects and not self.objects[key].deleted:
                        current = self.objects[key].get("metadata", {}).get("generation", 1)
                        meta["generation"] = int(current) + 1
        try:
            return await super()._handle(request)
        except jsonpatch.JsonPatchTestFailed:
            # kopf's finalizer patches test the resourceVersion; an API server answers a
            # stale one with 422 (kopf retries next cycle), kmock with a 500.
            return _status_response(422, "Invalid", "the object has been modified")


def _path_of(
    kind: Kind, namespace: str | None, name: str | None = None, sub: str | None = None
) -> str:
    return kind.path(namespace, name, sub)


@dataclass
class Cluster:
    """The emulated API server, seen from a test (its own requests are told apart by agent)."""

    emulator: StampingEmulator

    @property
    def url(self) -> str:
        return str(self.emulator.url).rstrip("/")

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        async with self.emulator.request(method, path, json=body, headers=headers) as response:
            text = await response.text()
            if response.status == 404:
                return None
            assert response.status < 300, f"{method} {path}: {response.status} {text[:300]}"
            return json.loads(text) if text else None

    async def create(self, kind: Kind, namespace: str | None, body: dict[str, Any]) -> Any:
        return await self._call("POST", _path_of(kind, namespace), body)

    async def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        sub: str | None = None,
    ) -> Any:
        return await self._call("PATCH", _path_of(kind, namespace, name, sub), body)

    async def delete(self, kind: Kind, namespace: str | None, name: str) -> Any:
        return await self._call("DELETE", _path_of(kind, namespace, name))

    async def get(self, kind: Kind, namespace: str | None, name: str) -> Any:
        return await self._call("GET", _path_of(kind, namespace, name))

    async def list_objects(self, kind: Kind, namespace: str | None) -> list[dict[str, Any]]:
        result = await self._call("GET", _path_of(kind, namespace))
        return list((result or {}).get("items") or [])

    def operator_requests(self) -> list[Any]:
        """Requests made by the operator (kopf and our client), not by the test or the hook."""
        return [
            req
            for req in list(self.emulator)
            if not str(req.headers.get("User-Agent", "")).startswith("kmock/")
            and req.headers.get("Authorization") != f"Bearer {HOOK_TOKEN}"
        ]

    def hook_api(self) -> KubeApi:
        """A client for the uninstall hook, told apart from the operator by its token."""
        config = Configuration(host=self.url)
        config.api_key = {"BearerToken": HOOK_TOKEN}
        config.api_key_prefix = {"BearerToken": "Bearer"}
        return KubeApi(config)

    async def watched(self, plurals: set[str], since: int = 0) -> bool:
        """Whether the operator has opened watch streams on all these resources, counting only
        its requests after the first ``since`` (it handles events only once it watches, and
        stopping it earlier strands kopf's discovery tasks)."""
        seen = {
            req.resource.plural
            for req in self.operator_requests()[since:]
            if req.action == enums.action.WATCH and req.resource is not None
        }
        return plurals <= seen

    def reject(self, rejection: Rejection) -> None:
        """From now on, refuse the operator's matching requests."""
        self.emulator.__dict__.setdefault("rejections", []).append(rejection)

    def clear_rejections(self) -> None:
        self.emulator.__dict__["rejections"] = []

    def enforce(self, granted: list[rbac.Grant] | None) -> None:
        """Refuse (403) every operator request these grants do not allow; None stops."""
        self.emulator.enforce = None if granted is None else rbac.permissions(granted)

    def requests_by(self, token: str) -> list[Any]:
        """The requests of the operator (or hook) started with this token."""
        return [
            req
            for req in list(self.emulator)
            if req.headers.get("Authorization") == f"Bearer {token}"
        ]

    def used_permissions(self) -> set[rbac.Permission]:
        used = set()
        for req in self.operator_requests():
            permission = permission_of(req)
            if permission is not None:
                used.add(permission)
        return used


EVENTS = Kind("", "v1", "events")


async def events_about(cluster: Cluster, namespace: str, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the events posted about one object."""
    return [
        (event.get("type", ""), event.get("reason", ""), event.get("message", ""))
        for event in await cluster.list_objects(EVENTS, namespace)
        if (event.get("involvedObject") or {}).get("name") == name
    ]


def permission_of(req: Any) -> rbac.Permission | None:
    """The RBAC (namespace, group, resource, verb, name) a request needs; None for discovery
    URLs. A create names no object (RBAC authorizes it before the object has a name)."""
    if req.resource is None or not req.resource.plural:
        return None
    resource = req.resource.plural + (f"/{req.subresource}" if req.subresource else "")
    if req.method == enums.method.PUT:
        verb = "update"
    else:
        verb = {
            enums.action.LIST: "list",
            enums.action.WATCH: "watch",
            enums.action.FETCH: "get",
            enums.action.CREATE: "create",
            enums.action.UPDATE: "patch",
            enums.action.DELETE: "delete",
        }[req.action]
    name = None if verb in ("create", "list", "watch") else (req.name or None)
    return (req.namespace or None, req.resource.group or "", resource, verb, name)


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 5.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``within`` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")
        await asyncio.sleep(0.02)


@dataclass
class RunningOperator:
    """The operator in its own thread and loop, exactly as ``main()`` runs it."""

    settings: OperatorSettings
    url: str
    liveness_endpoint: str | None = None
    # Sent as its bearer token, so a test can tell two operators' requests apart.
    token: str | None = None
    stop_flag: threading.Event = field(default_factory=threading.Event)
    ready_flag: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    _thread: threading.Thread | None = None

    def _login(self, **_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=self.url, insecure=True, token=self.token)

    def _kube_config(self) -> Configuration:
        config = Configuration(host=self.url)
        if self.token:
            config.api_key = {"BearerToken": self.token}
            config.api_key_prefix = {"BearerToken": "Bearer"}
        return config

    def _main(self) -> None:
        try:
            asyncio.run(
                run(
                    self.settings,
                    kube_config=self._kube_config(),
                    login=self._login,
                    stop_flag=self.stop_flag,
                    ready_flag=self.ready_flag,
                    liveness_endpoint=self.liveness_endpoint,
                )
            )
        except BaseException as exc:  # reported by stop(), in the test's thread
            self.error = exc

    async def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="engram-operator", daemon=True)
        self._thread.start()
        ready = await asyncio.to_thread(self.ready_flag.wait, 10)
        assert ready, f"operator did not start: {self.error!r}"

    async def stop(self) -> None:
        self.stop_flag.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 15)
            assert not self._thread.is_alive(), "operator did not stop"
        if self.error is not None:
            raise self.error


def declare_resources(emulator: StampingEmulator) -> None:
    for key, kind, namespaced, subresources in RESOURCES:
        emulator.resources[key] = kmock.ResourceInfo(
            kind=kind,
            singular=kind.lower(),
            namespaced=namespaced,
            verbs=ALL_VERBS,
            subresources=subresources,
        )


StartOperator = Callable[..., Awaitable[RunningOperator]]


def make_settings(**overrides: Any) -> OperatorSettings:
    values: dict[str, Any] = {
        "configmap_name": "engram-permissions",
        "configmap_namespace": OPERATOR_NS,
        "image": IMAGE,
        "job_service_account": "engram-maintenance",
        "job_env_configmap": "engram-env",
        "job_env_secret": "engram-qdrant",
        # The release namespace is always added; the tests' agents also live in these.
        "namespaces": "team-a,team-b",
        # Long enough never to fire unless a test asks for drift repair.
        "resync_seconds": 3600.0,
    }
    values.update(overrides)
    return OperatorSettings(**values)


async def run_job(
    cluster: Cluster,
    namespace: str,
    cronjob_name: str,
    job_name: str,
    *,
    message: str | None,
    succeeded: bool = True,
    started: str = "2026-11-29T03:00:00Z",
    finished: str = "2026-11-29T03:01:40Z",
) -> dict[str, Any]:
    """Play the CronJob and Job controllers (kmock has none): create a Job from the CronJob's
    template and its pod, then finish both; ``message`` is the pod's termination message."""
    from engram_operator.kube import CRONJOBS, JOBS, PODS

    cronjob = await cluster.get(CRONJOBS, namespace, cronjob_name)
    assert cronjob is not None, f"no CronJob {namespace}/{cronjob_name}"
    template = cronjob["spec"]["jobTemplate"]
    job = await cluster.create(
        JOBS,
        namespace,
        {
            "metadata": {
                "name": job_name,
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "CronJob",
                        "name": cronjob_name,
                        "uid": cronjob["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": template["spec"],
            "status": {"startTime": started, "active": 1},
        },
    )
    job_uid = job["metadata"]["uid"]
    terminated: dict[str, Any] = {"exitCode": 0 if succeeded else 1}
    if message is not None:
        terminated["message"] = message
    await cluster.create(
        PODS,
        namespace,
        {
            "metadata": {
                "name": f"{job_name}-x7k2p",
                "labels": {
                    "batch.kubernetes.io/controller-uid": job_uid,
                    "batch.kubernetes.io/job-name": job_name,
                },
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job_name,
                        "uid": job_uid,
                        "controller": True,
                    }
                ],
            },
            "status": {
                "phase": "Succeeded" if succeeded else "Failed",
                "containerStatuses": [{"name": "engram", "state": {"terminated": terminated}}],
            },
        },
    )
    condition = (
        {"type": "Complete", "status": "True", "lastTransitionTime": finished}
        if succeeded
        else {
            "type": "Failed",
            "status": "True",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
            "lastTransitionTime": finished,
        }
    )
    status: dict[str, Any] = {"active": None, "conditions": [condition]}
    if succeeded:
        status |= {"completionTime": finished, "succeeded": 1}
    else:
        status |= {"failed": 1}
    patched: dict[str, Any] = await cluster.patch(JOBS, namespace, job_name, {"status": status})
    return patched

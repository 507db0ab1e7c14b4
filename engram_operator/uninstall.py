"""``engram-operator uninstall``: what the chart's pre-delete hook runs, so `helm uninstall`
finishes.

Helm deletes the operator's Deployment and RBAC before custom resources, so nothing would
remove this release's finalizer from its EngramAgents and a namespace holding one would hang
in Terminating. The hook runs while the operator still does: it deletes every EngramAgent and
EngramMaintenance that belongs to this release (their Secrets and CronJobs go with them, by
owner reference), waits until the operator has let them go, and after ``wait_s`` seconds removes
this release's finalizers from any still there (the operator is not answering). Other releases'
resources are never touched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from engram_operator.kube import ENGRAM_AGENTS, ENGRAM_MAINTENANCES, Kind, KubeApi, KubeError
from engram_operator.naming import LEGACY_FINALIZER, finalizer
from engram_operator.ownership import belongs_to
from engram_operator.settings import OperatorSettings

log = logging.getLogger(__name__)
KINDS: Final = (ENGRAM_AGENTS, ENGRAM_MAINTENANCES)
POLL_S: Final = 0.5
LIST_ATTEMPTS: Final = 8


@dataclass
class Outcome:
    deleted: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def _ref(kind: Kind, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{kind.plural}/{meta.get('namespace')}/{meta.get('name')}"


async def _listed(api: KubeApi, kind: Kind, namespace: str | None) -> list[dict[str, Any]]:
    """A list, retried while the server says to wait (429 while a CRD's storage initialises,
    5xx): an uninstall right after an install or a CRD update must not fail for that."""
    delay = POLL_S
    for _ in range(LIST_ATTEMPTS - 1):
        try:
            return await api.list_objects(kind, namespace)
        except KubeError as exc:
            if exc.permanent or exc.status == 404:
                raise
            log.info("Listing %s: %s; again in %.1f s.", kind.plural, exc.describe(), delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
    return await api.list_objects(kind, namespace)


async def _ours(api: KubeApi, settings: OperatorSettings) -> list[tuple[Kind, dict[str, Any]]]:
    scopes: Iterable[str | None] = [None] if settings.watch_all else settings.namespaces
    found = []
    for kind in KINDS:
        for namespace in scopes:
            for obj in await _listed(api, kind, namespace):
                if belongs_to(
                    obj, release_namespace=settings.release_namespace, release=settings.release
                ):
                    found.append((kind, obj))
    return found


async def uninstall(api: KubeApi, settings: OperatorSettings, *, wait_s: float) -> Outcome:
    outcome = Outcome()
    for kind, obj in await _ours(api, settings):
        meta = obj["metadata"]
        try:
            await api.delete(kind, meta["namespace"], meta["name"])
            outcome.deleted.append(_ref(kind, obj))
        except KubeError as exc:
            outcome.failed.append(f"{_ref(kind, obj)}: {exc.describe()}")

    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    left = await _ours(api, settings)
    while left and loop.time() < deadline:
        await asyncio.sleep(POLL_S)
        left = await _ours(api, settings)

    mine = {finalizer(settings.release, settings.release_namespace), LEGACY_FINALIZER}
    for kind, obj in left:
        meta = obj["metadata"]
        kept = [name for name in meta.get("finalizers") or [] if name not in mine]
        try:
            await api.patch(
                kind,
                meta["namespace"],
                meta["name"],
                {"metadata": {"finalizers": kept, "resourceVersion": meta["resourceVersion"]}},
            )
            outcome.released.append(_ref(kind, obj))
        except KubeError as exc:
            outcome.failed.append(f"{_ref(kind, obj)}: {exc.describe()}")
    return outcome

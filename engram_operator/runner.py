"""Run the operator: kopf's settings, the registry, and the loop. Used by ``main()`` and tests."""

from __future__ import annotations

import asyncio
import threading

import kopf
from kubernetes.aio.client import Configuration

from engram_operator import handlers
from engram_operator.naming import KOPF_PREFIX, finalizer
from engram_operator.settings import OperatorSettings


def kopf_settings(operator: OperatorSettings) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.finalizer = finalizer(operator.release, operator.release_namespace)
    # Keep kopf's bookkeeping in annotations under our group, not in `status.kopf`, which the
    # CRDs' status schemas do not declare (a real API server would prune it).
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=KOPF_PREFIX)
    # Serve the resources and namespaces known at start instead of watching CRDs and namespaces
    # come and go: that would need cluster-wide list/watch on both for no benefit here (the
    # chart installs the CRDs before the operator, and the watched namespaces are exact names).
    settings.scanning.disabled = True
    return settings


def build_registry(
    settings: OperatorSettings, *, kube_config: Configuration, login: handlers.LoginFn
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    handlers.register(registry, settings=settings, kube_config=kube_config, login=login)
    return registry


async def run(
    settings: OperatorSettings,
    *,
    kube_config: Configuration,
    login: handlers.LoginFn,
    stop_flag: asyncio.Event | threading.Event | None = None,
    ready_flag: asyncio.Event | threading.Event | None = None,
    liveness_endpoint: str | None = None,
) -> None:
    """Run until ``stop_flag`` is set (or a signal arrives, in the main thread)."""
    await kopf.operator(
        registry=build_registry(settings, kube_config=kube_config, login=login),
        settings=kopf_settings(settings),
        # One replica (the chart uses strategy Recreate), so no peering: it would need rights
        # on kopf's peering resources.
        standalone=True,
        clusterwide=settings.clusterwide,
        namespaces=[] if settings.clusterwide else settings.namespaces,
        memo=kopf.Memo(),
        stop_flag=stop_flag,
        ready_flag=ready_flag,
        liveness_endpoint=liveness_endpoint,
    )

"""kopf registrations, and nothing else: each handler hands over to a reconciler."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import kopf
from kubernetes.aio.client import Configuration

from engram_operator import agents, maintenance
from engram_operator.context import OperatorContext, handler_context
from engram_operator.folding import AgentSnapshot
from engram_operator.kube import KubeApi
from engram_operator.naming import (
    AGENTS,
    GROUP,
    LABEL_MAINTENANCE,
    LABEL_MANAGED_BY,
    MAINTENANCES,
    MANAGED_BY,
    VERSION,
)
from engram_operator.resync import resync_forever
from engram_operator.settings import OperatorSettings

LoginFn = Callable[..., kopf.ConnectionInfo | None]
# kopf passes each index to handlers under the indexing function's id.
AGENT_INDEX = "engram_agents"
MAINTENANCE_INDEX = "engram_maintenances"


def register(
    registry: kopf.OperatorRegistry,
    *,
    settings: OperatorSettings,
    kube_config: Configuration,
    login: LoginFn,
) -> None:
    kopf.on.login(registry=registry)(login)

    @kopf.on.startup(registry=registry)
    async def open_context(*, memo: Any, logger: kopf.Logger, **kwargs: Any) -> None:
        ctx = OperatorContext(
            settings=settings,
            api=KubeApi(kube_config),
            agent_index=kwargs[AGENT_INDEX],
            maintenance_index=kwargs[MAINTENANCE_INDEX],
        )
        memo.engram = ctx
        await agents.ensure_permission_configmap(ctx, logger)
        ctx.resync_task = asyncio.create_task(resync_forever(ctx), name="engram resync")

    @kopf.on.cleanup(registry=registry)
    async def close_context(*, memo: Any, **_: Any) -> None:
        ctx = getattr(memo, "engram", None)
        if isinstance(ctx, OperatorContext):
            if ctx.resync_task is not None:
                ctx.resync_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ctx.resync_task
            await ctx.api.close()

    # EngramAgent ---------------------------------------------------------------------------

    @kopf.index(GROUP, VERSION, AGENTS, id=AGENT_INDEX, registry=registry)
    def engram_agents(*, body: kopf.Body, **_: Any) -> dict[None, AgentSnapshot]:
        return agents.snapshot_agent(body)

    @kopf.on.resume(GROUP, VERSION, AGENTS, registry=registry)
    @kopf.on.create(GROUP, VERSION, AGENTS, registry=registry)
    @kopf.on.update(GROUP, VERSION, AGENTS, field="spec", registry=registry)
    async def reconcile_agent(*, body: kopf.Body, memo: Any, logger: kopf.Logger, **_: Any) -> None:
        error = await agents.reconcile_agent(handler_context(memo), body, logger)
        if error:
            raise kopf.PermanentError(error)

    @kopf.on.delete(GROUP, VERSION, AGENTS, registry=registry)
    async def delete_agent(*, body: kopf.Body, memo: Any, logger: kopf.Logger, **_: Any) -> None:
        await agents.delete_agent(handler_context(memo), body, logger)

    # EngramMaintenance -----------------------------------------------------------------------

    @kopf.index(GROUP, VERSION, MAINTENANCES, id=MAINTENANCE_INDEX, registry=registry)
    def engram_maintenances(*, body: kopf.Body, **_: Any) -> dict[None, dict[str, Any]]:
        return maintenance.snapshot_maintenance(body)

    @kopf.on.resume(GROUP, VERSION, MAINTENANCES, registry=registry)
    @kopf.on.create(GROUP, VERSION, MAINTENANCES, registry=registry)
    @kopf.on.update(GROUP, VERSION, MAINTENANCES, field="spec", registry=registry)
    async def reconcile_maintenance(
        *, body: kopf.Body, memo: Any, logger: kopf.Logger, **_: Any
    ) -> None:
        error = await maintenance.reconcile_maintenance(handler_context(memo), body, logger)
        if error:
            raise kopf.PermanentError(error)

    @kopf.on.event(
        "batch",
        "v1",
        "jobs",
        labels={LABEL_MAINTENANCE: kopf.PRESENT, LABEL_MANAGED_BY: MANAGED_BY},
        registry=registry,
    )
    async def job_changed(
        *, event: kopf.RawEvent, body: kopf.Body, memo: Any, logger: kopf.Logger, **_: Any
    ) -> None:
        if event.get("type") != "DELETED":
            await maintenance.record_job(handler_context(memo), body, logger)

"""kopf registrations, and nothing else: each handler hands over to a reconciler."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import kopf
from kubernetes.aio.client import Configuration

from engram_operator import agents, maintenance
from engram_operator.conditions import Refusal
from engram_operator.context import OperatorContext, handler_context
from engram_operator.folding import AgentSnapshot
from engram_operator.jobwatch import watch_jobs_forever
from engram_operator.kube import KubeApi
from engram_operator.naming import AGENTS, GROUP, MAINTENANCES, VERSION
from engram_operator.ownership import belongs_to
from engram_operator.resync import resync_forever
from engram_operator.settings import OperatorSettings

LoginFn = Callable[..., kopf.ConnectionInfo | None]
# kopf passes each index to handlers under the indexing function's id.
AGENT_INDEX = "engram_agents"
MAINTENANCE_INDEX = "engram_maintenances"
# A refusal that may pass by itself (a 5xx, a conflict) is retried after this long.
RETRY_DELAY_S = 30.0


def _raise(refusal: Refusal | None) -> None:
    """kopf's verdict on a handler: a permanent refusal is not retried until the resource
    changes (the resync still looks at it every round), a transient one after a delay."""
    if refusal is None:
        return
    if refusal.permanent:
        raise kopf.PermanentError(refusal.message)
    raise kopf.TemporaryError(refusal.message, delay=RETRY_DELAY_S)


def register(
    registry: kopf.OperatorRegistry,
    *,
    settings: OperatorSettings,
    kube_config: Configuration,
    login: LoginFn,
) -> None:
    kopf.on.login(registry=registry)(login)

    def ours(body: kopf.Body, **_: Any) -> bool:
        """Only this release's resources: other releases' are never indexed, patched or
        finalized here (see ownership.py)."""
        return belongs_to(
            body, release_namespace=settings.release_namespace, release=settings.release
        )

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
        ctx.job_watch_task = asyncio.create_task(watch_jobs_forever(ctx), name="engram jobs")

    @kopf.on.cleanup(registry=registry)
    async def close_context(*, memo: Any, **_: Any) -> None:
        ctx = getattr(memo, "engram", None)
        if isinstance(ctx, OperatorContext):
            for task in (ctx.resync_task, ctx.job_watch_task):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await ctx.api.close()

    # EngramAgent ---------------------------------------------------------------------------

    @kopf.index(GROUP, VERSION, AGENTS, id=AGENT_INDEX, when=ours, registry=registry)
    def engram_agents(*, body: kopf.Body, **_: Any) -> dict[None, AgentSnapshot]:
        return agents.snapshot_agent(body)

    @kopf.on.resume(GROUP, VERSION, AGENTS, when=ours, registry=registry)
    @kopf.on.create(GROUP, VERSION, AGENTS, when=ours, registry=registry)
    @kopf.on.update(GROUP, VERSION, AGENTS, field="spec", when=ours, registry=registry)
    async def reconcile_agent(*, body: kopf.Body, memo: Any, logger: kopf.Logger, **_: Any) -> None:
        _raise(await agents.reconcile_agent(handler_context(memo), body, logger))

    @kopf.on.delete(GROUP, VERSION, AGENTS, when=ours, registry=registry)
    async def delete_agent(*, body: kopf.Body, memo: Any, logger: kopf.Logger, **_: Any) -> None:
        await agents.delete_agent(handler_context(memo), body, logger)

    # EngramMaintenance -----------------------------------------------------------------------

    @kopf.index(GROUP, VERSION, MAINTENANCES, id=MAINTENANCE_INDEX, when=ours, registry=registry)
    def engram_maintenances(*, body: kopf.Body, **_: Any) -> dict[None, dict[str, Any]]:
        return maintenance.snapshot_maintenance(body)

    @kopf.on.resume(GROUP, VERSION, MAINTENANCES, when=ours, registry=registry)
    @kopf.on.create(GROUP, VERSION, MAINTENANCES, when=ours, registry=registry)
    @kopf.on.update(GROUP, VERSION, MAINTENANCES, field="spec", when=ours, registry=registry)
    async def reconcile_maintenance(
        *, body: kopf.Body, memo: Any, logger: kopf.Logger, **_: Any
    ) -> None:
        _raise(await maintenance.reconcile_maintenance(handler_context(memo), body, logger))

    # Finished Jobs: watch_jobs_forever (the release namespace only, with a label selector).

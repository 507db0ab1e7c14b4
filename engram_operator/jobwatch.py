"""Notice finished maintenance Jobs as they finish: one watch, in the job namespace only, with a
server-side label selector for this release's Jobs.

kopf serves every resource in every watched namespace (or the whole cluster) alike; a kopf Job
handler would stream every Job there and need Job rights in each namespace. This watch needs
``list`` and ``watch`` on Jobs in the release namespace and sees only our own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from engram_operator import maintenance
from engram_operator.context import Logger, OperatorContext
from engram_operator.kube import JOBS, KubeError
from engram_operator.naming import LABEL_INSTANCE, LABEL_MAINTENANCE, LABEL_MANAGED_BY, MANAGED_BY
from engram_operator.settings import OperatorSettings

log = logging.getLogger(__name__)
# After a failed list or watch: first retry, and the ceiling of the doubling backoff.
RETRY_MIN_S: Final = 1.0
RETRY_MAX_S: Final = 60.0
# A watch whose resourceVersion is too old: list again.
GONE: Final = 410


def job_selector(settings: OperatorSettings) -> str:
    """The Jobs of this release's maintenance CronJobs (their template labels)."""
    return ",".join(
        [
            f"{LABEL_MANAGED_BY}={MANAGED_BY}",
            f"{LABEL_INSTANCE}={settings.release}",
            LABEL_MAINTENANCE,
        ]
    )


async def watch_jobs_forever(ctx: OperatorContext, logger: Logger = log) -> None:
    namespace = ctx.settings.job_namespace
    selector = job_selector(ctx.settings)
    delay = RETRY_MIN_S
    while True:
        try:
            jobs, version = await ctx.api.list_page(JOBS, namespace, label_selector=selector)
            for job in jobs:
                await maintenance.record_job(ctx, job, logger)
            while version:
                version = await _watch_once(ctx, namespace, selector, version, logger)
                delay = RETRY_MIN_S
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("Job watch in %s failed (%s); again in %.0f s.", namespace, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)


async def _watch_once(
    ctx: OperatorContext, namespace: str, selector: str, version: str, logger: Logger
) -> str:
    """One watch stream; returns where to continue, or "" to list again."""
    async for event in ctx.api.watch(
        JOBS, namespace, label_selector=selector, resource_version=version
    ):
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == GONE:
                return ""
            raise KubeError("WATCH", namespace, int(obj.get("code") or 500), "", "")
        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        if kind in ("ADDED", "MODIFIED"):
            await maintenance.record_job(ctx, obj, logger)
    return version

"""The periodic resync: repair drift that no watch event announces.

Deleted or emptied token Secrets, hand-edited CronJobs or ConfigMaps, and Jobs that finished
while the operator was down are all found here. One loop for the whole operator, not a timer per
object: the agents are folded once per round instead of once per agent.
"""

from __future__ import annotations

import asyncio
import logging

from engram_operator import agents, maintenance
from engram_operator.context import Logger, OperatorContext

log = logging.getLogger(__name__)


async def resync_forever(ctx: OperatorContext, logger: Logger = log) -> None:
    """Every ``resync_seconds``, resync everything; errors are logged and retried next round."""
    while True:
        await asyncio.sleep(ctx.settings.resync_seconds)
        if not ctx.indexed.is_set():
            # No resource handler has run yet: the indexes may still be filling, and folding a
            # partial index would drop agents from the config. (With nothing to watch at all,
            # there is also nothing to resync.)
            continue
        try:
            await resync_once(ctx, logger)
        except Exception:
            logger.exception("Resync failed; retrying in %s s.", ctx.settings.resync_seconds)


async def resync_once(ctx: OperatorContext, logger: Logger) -> None:
    """One round. Each resource on its own: one that fails (a rejected CronJob, a namespace
    being deleted) is logged and in its status, and the others are still repaired."""
    try:
        await agents.resync_agents(ctx, logger)
    except Exception:
        logger.exception("Resync of the agents failed; the maintenances carry on.")
    for body in [body for store in ctx.maintenance_index.values() for body in store]:
        meta = body.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        try:
            await maintenance.reconcile_maintenance(ctx, body, logger)
            await maintenance.collect_runs(ctx, body, logger)
        except Exception:
            logger.exception(
                "Resync of EngramMaintenance %s/%s failed; the others carry on.",
                meta.get("namespace"),
                meta.get("name"),
            )

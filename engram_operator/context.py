"""What every handler shares within one operator process: settings, the API client, kopf's
indexes, and the little state that must survive between events (token digests, locks)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from engram_operator.folding import AgentSnapshot, TokenState
from engram_operator.kube import KubeApi
from engram_operator.settings import OperatorSettings

# What kopf hands handlers as `logger` (its per-object loggers are adapters).
Logger: TypeAlias = logging.Logger | logging.LoggerAdapter[Any]
# kopf's indexes: {None: Store[value]} with one value per object.
AgentIndex: TypeAlias = Mapping[Any, Iterable[AgentSnapshot]]
MaintenanceIndex: TypeAlias = Mapping[Any, Iterable[Mapping[str, Any]]]


@dataclass
class OperatorContext:
    settings: OperatorSettings
    api: KubeApi
    agent_index: AgentIndex
    maintenance_index: MaintenanceIndex
    # Digests of the tokens in agents' Secrets, by EngramAgent uid, so that folding the config
    # does not read every Secret on every event. Refreshed by each agent's reconcile.
    tokens: dict[str, TokenState] = field(default_factory=dict)
    # All agent work (Secrets, then the fold) runs one at a time: each fold reads the whole
    # index and writes the whole ConfigMap, so the last write reflects the last event.
    agents_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # One run-recording at a time, so a Job seen by its watch event and by the resync is
    # recorded once.
    runs_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Set once kopf has listed every watched resource into the indexes (see handler_context).
    indexed: asyncio.Event = field(default_factory=asyncio.Event)
    resync_task: asyncio.Task[None] | None = None
    job_watch_task: asyncio.Task[None] | None = None

    @property
    def configmap_ref(self) -> str:
        return f"{self.settings.configmap_namespace}/{self.settings.configmap_name}"


def handler_context(memo: Any) -> OperatorContext:
    """The context the startup handler put into kopf's memo, for a resource handler.

    kopf runs resource handlers only after every index has been filled from its initial list,
    so the first call also tells the resync loop that the indexes are complete.
    """
    ctx = getattr(memo, "engram", None)
    if not isinstance(ctx, OperatorContext):
        raise RuntimeError("the operator context is not initialised (startup did not run)")
    ctx.indexed.set()
    return ctx

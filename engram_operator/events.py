"""Kubernetes events on our resources, for ``kubectl describe``.

kopf only posts events from inside its handlers (it keeps the posting queue in a context
variable); from the resync loop there may be none, and then the news lives in the status alone.
Event messages never carry tokens: callers pass names and counts only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import kopf

from engram_operator.conditions import MESSAGE_MAX, utc_now
from engram_operator.kube import EVENTS, KubeApi, KubeError
from engram_operator.naming import MANAGED_BY

log = logging.getLogger(__name__)


def announce(obj: Mapping[str, Any], *, reason: str, message: str, warning: bool = False) -> None:
    try:
        kopf.event(
            kopf.Body(cast(kopf.RawBody, dict(obj))),
            type="Warning" if warning else "Normal",
            reason=reason,
            message=message[:MESSAGE_MAX],
        )
    except LookupError:
        log.debug("No event for %s outside a kopf handler: %s", reason, message)


async def post_event(
    api: KubeApi, obj: Mapping[str, Any], *, reason: str, message: str, warning: bool = False
) -> None:
    """An event posted by the operator itself, for news found outside kopf's handlers (the Job
    watch). A refused event is logged, never raised: it is news, not state."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    now = utc_now()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "namespace": namespace,
            "uid": meta.get("uid"),
        },
        "type": "Warning" if warning else "Normal",
        "reason": reason,
        "message": message[:MESSAGE_MAX],
        "source": {"component": MANAGED_BY},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        await api.create(EVENTS, namespace, event)
    except KubeError as exc:
        log.warning("Could not post event %s: %s", reason, exc.describe())

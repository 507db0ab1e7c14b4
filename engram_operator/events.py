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

from engram_operator.conditions import MESSAGE_MAX

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

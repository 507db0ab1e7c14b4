"""What to do when a remote provider fails: retries with jitter, a circuit breaker, failover.

Shared by the embedding chain and the LLM chain. Providers translate their SDK's exceptions into
a :class:`Failure` (transient or not); this module decides whether to try again, to skip a
provider whose breaker is open, or to move on to the next provider. A dead provider costs one
probe per ``breaker_reset_s``, not one timeout per call.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

T = TypeVar("T")
P = TypeVar("P")

FailureKind = Literal[
    "timeout",  # no answer in time
    "connection",  # could not connect, or the connection broke
    "rate_limited",  # 429 / quota
    "server",  # 5xx
    "malformed",  # an answer we cannot use (bad JSON, wrong count or dimension)
    "auth",  # 401 / 403: the key is missing, wrong or lacks rights
    "invalid_request",  # other 4xx: the request itself is wrong (input, model name)
    "refused",  # the provider declined to answer (safety block)
]
TRANSIENT_KINDS: frozenset[FailureKind] = frozenset(
    {"timeout", "connection", "rate_limited", "server", "malformed"}
)


class ResilienceSettings(BaseModel):
    """Retry and breaker knobs of one provider chain (``ENGRAM_<SECTION>__RESILIENCE__*``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Attempts per provider per call, the first included; 1 = no retries.
    attempts: int = Field(default=3, ge=1, le=10)
    # Full-jitter exponential backoff: the n-th retry waits uniform(0, min(max, base * 2**(n-1))).
    base_delay_s: float = Field(default=0.2, ge=0, le=60)
    max_delay_s: float = Field(default=2.0, ge=0, le=300)
    # Consecutive transient failures that open a provider's breaker.
    breaker_failures: int = Field(default=3, ge=1, le=1000)
    # How long an open breaker skips its provider before letting one probe call through.
    breaker_reset_s: float = Field(default=30.0, gt=0, le=3600)

    def backoff(self, retry: int, rng: random.Random) -> float:
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** (retry - 1)))
        return rng.uniform(0.0, ceiling)


@dataclass(frozen=True)
class Failure:
    """A provider call that failed, described without secrets or user content."""

    kind: FailureKind
    detail: str

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT_KINDS

    @classmethod
    def from_status(cls, status: int, detail: str) -> Failure:
        kind: FailureKind
        if status == 408:
            kind = "timeout"
        elif status == 429:
            kind = "rate_limited"
        elif status >= 500:
            kind = "server"
        elif status in (401, 403):
            kind = "auth"
        else:
            kind = "invalid_request"
        return cls(kind, f"HTTP {status}" + (f": {detail}" if detail else ""))


class ProviderFailed(Exception):
    """Raised by a provider adapter inside a chain; carries the :class:`Failure`."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.kind}: {failure.detail}")
        self.failure = failure


class BreakerState(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Admission(enum.Enum):
    NORMAL = "normal"
    PROBE = "probe"  # the single trial call of a half-open breaker: no retries


class CircuitBreaker:
    """Consecutive-failure breaker. Not thread-safe: used from one event loop, never awaited
    between a check and its update."""

    def __init__(
        self,
        *,
        failures: int,
        reset_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = failures
        self._reset_s = reset_s
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probe_in_flight = False

    @property
    def state(self) -> BreakerState:
        return self._state

    def admit(self) -> Admission | None:
        """May a call go to the provider now? ``None`` means skip it."""
        if self._state is BreakerState.CLOSED:
            return Admission.NORMAL
        if self._state is BreakerState.OPEN:
            if self._clock() - self._opened_at < self._reset_s:
                return None
            self._state = BreakerState.HALF_OPEN
        if self._probe_in_flight:
            return None
        self._probe_in_flight = True
        return Admission.PROBE

    def succeeded(self) -> None:
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._probe_in_flight = False

    def failed(self) -> None:
        self._failures += 1
        if self._state is BreakerState.HALF_OPEN or self._failures >= self._threshold:
            self._state = BreakerState.OPEN
            self._opened_at = self._clock()
            self._probe_in_flight = False

    def abandoned(self) -> None:
        """A call was cancelled: free a probe slot so the next call may probe instead."""
        if self._state is BreakerState.HALF_OPEN and self._probe_in_flight:
            self._probe_in_flight = False


class BreakerOpen(Exception):
    def __init__(self) -> None:
        super().__init__("circuit breaker open")


async def call_with_retries(
    op: Callable[[], Awaitable[T]],
    *,
    settings: ResilienceSettings,
    breaker: CircuitBreaker,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> T:
    """Run ``op`` under ``breaker``, retrying :class:`ProviderFailed` transient failures.

    Raises :class:`BreakerOpen` without calling ``op`` when the breaker says skip. A
    non-transient failure (bad key, bad request) is raised at once and counts as the provider
    being up: it answered.
    """
    admission = breaker.admit()
    if admission is None:
        raise BreakerOpen()
    attempts = 1 if admission is Admission.PROBE else settings.attempts
    rand = rng or random.Random()
    attempt = 1
    while True:
        try:
            result = await op()
        except ProviderFailed as exc:
            if not exc.failure.transient:
                breaker.succeeded()
                raise
            breaker.failed()
            if attempt >= attempts or breaker.state is not BreakerState.CLOSED:
                raise
        except BaseException:
            breaker.abandoned()
            raise
        else:
            breaker.succeeded()
            return result
        await sleep(settings.backoff(attempt, rand))
        attempt += 1
        if breaker.admit() is None:
            # Another call opened the breaker while this one waited.
            raise BreakerOpen()


@dataclass
class Member(Generic[P]):
    """One provider in a chain, with its own breaker."""

    role: str  # "primary", "fallback"
    name: str  # the provider's model id, for messages
    provider: P
    breaker: CircuitBreaker


CHAIN_ROLES = ("primary", "fallback")


class _HasModelId(Protocol):
    @property
    def model_id(self) -> str: ...


M = TypeVar("M", bound=_HasModelId)


def chain_members(
    providers: Sequence[M], settings: ResilienceSettings, clock: Callable[[], float]
) -> list[Member[M]]:
    """A primary and an optional fallback, each behind its own circuit breaker."""
    return [
        Member(
            role=role,
            name=p.model_id,
            provider=p,
            breaker=CircuitBreaker(
                failures=settings.breaker_failures, reset_s=settings.breaker_reset_s, clock=clock
            ),
        )
        for role, p in zip(CHAIN_ROLES, providers, strict=False)
    ]


class AllFailed(Exception):
    """Every provider in a chain failed or was skipped. ``reasons`` name each one."""

    def __init__(self, reasons: list[str], last: Failure | None) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons
        self.last = last


async def failover(
    members: Sequence[Member[P]],
    call: Callable[[P], Awaitable[T]],
    *,
    settings: ResilienceSettings,
    what: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> tuple[T, Member[P]]:
    """Try each member in order; move on after transient failures or an open breaker.

    A non-transient failure raises :class:`ProviderFailed` at once: another provider would
    not fix a bad request, and a bad key is a configuration error to surface, not to hide.
    """
    reasons: list[str] = []
    last: Failure | None = None
    for member in members:
        was_closed = member.breaker.state is BreakerState.CLOSED
        try:
            result = await call_with_retries(
                functools.partial(call, member.provider),
                settings=settings,
                breaker=member.breaker,
                sleep=sleep,
                rng=rng,
            )
        except BreakerOpen:
            reasons.append(f"{member.role} {member.name}: skipped, circuit breaker open")
            continue
        except ProviderFailed as exc:
            if not exc.failure.transient:
                raise
            last = exc.failure
            reasons.append(
                f"{member.role} {member.name}: {exc.failure.kind} ({exc.failure.detail})"
            )
            if was_closed and member.breaker.state is BreakerState.OPEN:
                log.warning(
                    "%s provider %s %s is failing (%s); circuit breaker opened for %.0f s",
                    what,
                    member.role,
                    member.name,
                    exc.failure.kind,
                    settings.breaker_reset_s,
                )
            continue
        if reasons:
            log.warning("%s served by %s %s after: %s", what, member.role, member.name, reasons)
        return result, member
    raise AllFailed(reasons, last)

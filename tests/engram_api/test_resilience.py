"""Retries, jitter and the circuit breaker, driven by a hand-moved clock (no waiting)."""

from __future__ import annotations

import random

import pytest

from engram_api.resilience import (
    BreakerOpen,
    BreakerState,
    CircuitBreaker,
    Failure,
    ProviderFailed,
    ResilienceSettings,
    call_with_retries,
)
from tests.fakes.clock import FakeClock


class Flaky:
    """An operation that fails with the given failures, then succeeds."""

    def __init__(self, *failures: Failure) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise ProviderFailed(self.failures.pop(0))
        return "ok"


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


DOWN = Failure("server", "HTTP 503")


def breaker(clock: FakeClock, failures: int = 3, reset_s: float = 30.0) -> CircuitBreaker:
    return CircuitBreaker(failures=failures, reset_s=reset_s, clock=clock)


async def test_transient_failures_are_retried_until_success() -> None:
    op = Flaky(DOWN, Failure("rate_limited", "HTTP 429"))
    sleep = SleepRecorder()
    result = await call_with_retries(
        op, settings=ResilienceSettings(attempts=3), breaker=breaker(FakeClock()), sleep=sleep
    )
    assert result == "ok"
    assert op.calls == 3
    assert len(sleep.delays) == 2


async def test_retries_stop_after_the_configured_attempts() -> None:
    op = Flaky(DOWN, DOWN, DOWN, DOWN)
    with pytest.raises(ProviderFailed):
        await call_with_retries(
            op,
            settings=ResilienceSettings(attempts=2, breaker_failures=10),
            breaker=breaker(FakeClock(), failures=10),
            sleep=SleepRecorder(),
        )
    assert op.calls == 2


async def test_a_non_transient_failure_is_raised_at_once_without_retry() -> None:
    op = Flaky(Failure("auth", "HTTP 401"))
    cb = breaker(FakeClock())
    with pytest.raises(ProviderFailed) as err:
        await call_with_retries(
            op, settings=ResilienceSettings(), breaker=cb, sleep=SleepRecorder()
        )
    assert err.value.failure.kind == "auth"
    assert op.calls == 1
    assert cb.state is BreakerState.CLOSED


async def test_backoff_is_jittered_and_bounded_by_the_exponential_ceiling() -> None:
    settings = ResilienceSettings(
        attempts=6, base_delay_s=0.1, max_delay_s=0.3, breaker_failures=100
    )
    sleep = SleepRecorder()
    op = Flaky(DOWN, DOWN, DOWN, DOWN, DOWN)
    await call_with_retries(
        op,
        settings=settings,
        breaker=breaker(FakeClock(), failures=100),
        sleep=sleep,
        rng=random.Random(7),
    )
    ceilings = [0.1, 0.2, 0.3, 0.3, 0.3]
    assert len(sleep.delays) == 5
    assert all(0.0 <= d <= c for d, c in zip(sleep.delays, ceilings, strict=True))
    # Jitter: the waits are not a fixed schedule.
    assert len({round(d, 6) for d in sleep.delays}) == 5


async def test_consecutive_failures_open_the_breaker_and_calls_are_skipped() -> None:
    clock = FakeClock()
    cb = breaker(clock, failures=2)
    op = Flaky(DOWN, DOWN)
    with pytest.raises(ProviderFailed):
        await call_with_retries(
            op, settings=ResilienceSettings(attempts=5), breaker=cb, sleep=SleepRecorder()
        )
    # The breaker opened after the second failure: no third attempt.
    assert op.calls == 2
    assert cb.state is BreakerState.OPEN
    skipped = Flaky()
    with pytest.raises(BreakerOpen):
        await call_with_retries(skipped, settings=ResilienceSettings(), breaker=cb)
    assert skipped.calls == 0


async def test_an_open_breaker_lets_one_probe_through_after_the_reset_time() -> None:
    clock = FakeClock()
    cb = breaker(clock, failures=1, reset_s=30)
    cb.failed()
    assert cb.admit() is None
    clock.advance(29.9)
    assert cb.admit() is None
    clock.advance(0.2)
    probe = cb.admit()
    assert probe is not None
    assert cb.state is BreakerState.HALF_OPEN
    # While the probe is out, everyone else is still skipped.
    assert cb.admit() is None


async def test_a_probe_gets_a_single_attempt_and_a_failed_probe_reopens_the_breaker() -> None:
    clock = FakeClock()
    cb = breaker(clock, failures=1, reset_s=30)
    cb.failed()
    clock.advance(31)
    op = Flaky(DOWN, DOWN)
    with pytest.raises(ProviderFailed):
        await call_with_retries(
            op, settings=ResilienceSettings(attempts=5), breaker=cb, sleep=SleepRecorder()
        )
    assert op.calls == 1
    assert cb.state is BreakerState.OPEN
    assert cb.admit() is None


async def test_a_successful_probe_closes_the_breaker() -> None:
    clock = FakeClock()
    cb = breaker(clock, failures=1, reset_s=30)
    cb.failed()
    clock.advance(31)
    assert await call_with_retries(Flaky(), settings=ResilienceSettings(), breaker=cb) == "ok"
    assert cb.state is BreakerState.CLOSED


async def test_a_cancelled_probe_frees_the_slot_for_the_next_call() -> None:
    clock = FakeClock()
    cb = breaker(clock, failures=1, reset_s=30)
    cb.failed()
    clock.advance(31)

    async def cancelled() -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await call_with_retries(cancelled, settings=ResilienceSettings(), breaker=cb)
    assert cb.admit() is not None


def test_http_statuses_map_to_transient_or_not() -> None:
    transient = {s: Failure.from_status(s, "").transient for s in (408, 429, 500, 502, 503)}
    permanent = {s: Failure.from_status(s, "").transient for s in (400, 401, 403, 404, 422)}
    assert all(transient.values())
    assert not any(permanent.values())
    assert Failure.from_status(401, "").kind == "auth"
    assert Failure.from_status(429, "").kind == "rate_limited"

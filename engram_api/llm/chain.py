"""Primary then fallback LLM, at run time, with retries and a breaker per provider.

The same failover rules as the embedding chain (:mod:`engram_api.resilience`). The usage of
a call counts every attempt that cost tokens, including answers that were unusable.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence

from engram_api.llm.base import LLM, ChatMessage, Completion, LLMConfigError, LLMError, TokenUsage
from engram_api.resilience import (
    CHAIN_ROLES,
    AllFailed,
    Failure,
    ProviderFailed,
    ResilienceSettings,
    chain_members,
    failover,
)

_ROLES = CHAIN_ROLES


class LLMChain:
    def __init__(
        self,
        providers: Sequence[LLM],
        *,
        settings: ResilienceSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not providers or len(providers) > len(_ROLES):
            raise LLMConfigError("an LLM chain has a primary and at most one fallback")
        self._settings = settings or ResilienceSettings()
        self._sleep = sleep
        self._rng = rng
        self._members = chain_members(providers, self._settings, clock)

    @property
    def model_id(self) -> str:
        return self._members[0].provider.model_id

    @property
    def model_ids(self) -> list[str]:
        return [m.provider.model_id for m in self._members]

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        json_output: bool = False,
    ) -> Completion:
        spent = TokenUsage()

        async def attempt(provider: LLM) -> Completion:
            nonlocal spent
            try:
                return await provider.complete(
                    messages,
                    max_output_tokens=max_output_tokens,
                    temperature=temperature,
                    json_output=json_output,
                )
            except LLMError as exc:
                spent = spent + exc.usage
                raise ProviderFailed(Failure(exc.kind, str(exc))) from None

        try:
            completion, _ = await failover(
                self._members,
                attempt,
                settings=self._settings,
                what="LLM call",
                sleep=self._sleep,
                rng=self._rng,
            )
        except ProviderFailed as exc:
            raise LLMError(exc.failure.detail, kind=exc.failure.kind, usage=spent) from None
        except AllFailed as exc:
            kind = exc.last.kind if exc.last else "server"
            raise LLMError(
                f"no LLM provider available: {exc}", kind=kind, retryable=True, usage=spent
            ) from None
        return Completion(
            completion.text, completion.usage + spent, completion.model_id, completion.truncated
        )

    async def aclose(self) -> None:
        for m in self._members:
            await m.provider.aclose()

"""A per-run token budget: LLM work stops when it is spent, and says so.

Before each call the budget reserves the worst case (an estimate of the prompt plus the full
output limit) and refuses the call if that could overrun; after the call it charges what the
provider reported. So a run never starts a call it cannot afford, and the report can say how
many tokens were used and why the remaining LLM steps were skipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engram_api.llm.base import LLM, ChatMessage, Completion, LLMError, TokenUsage

# Roughly 4 characters per token for English; a few tokens of framing per message.
_CHARS_PER_TOKEN = 4
_PER_MESSAGE = 4


def estimate_prompt_tokens(messages: Sequence[ChatMessage]) -> int:
    return sum(math.ceil(len(m.content) / _CHARS_PER_TOKEN) + _PER_MESSAGE for m in messages)


class BudgetExhausted(RuntimeError):
    """Raised instead of an LLM call the budget cannot cover; its message is for the report."""

    def __init__(self, *, limit: int, used: int, needed: int) -> None:
        super().__init__(
            f"LLM token budget for this run is spent: {used} of {limit} tokens used, the next "
            f"call could need up to {needed}; remaining LLM steps are skipped"
        )
        self.limit = limit
        self.used = used
        self.needed = needed


class TokenBudget:
    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("token budget must be >= 0")
        self.limit = limit
        self._usage = TokenUsage()
        self._reserved = 0
        self._calls = 0

    @property
    def usage(self) -> TokenUsage:
        return self._usage

    @property
    def used(self) -> int:
        return self._usage.total

    @property
    def calls(self) -> int:
        return self._calls

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used - self._reserved)

    @property
    def exhausted(self) -> bool:
        return self.remaining == 0

    def reserve(self, tokens: int) -> None:
        if tokens > self.remaining:
            raise BudgetExhausted(limit=self.limit, used=self.used + self._reserved, needed=tokens)
        self._reserved += tokens

    def settle(self, reserved: int, usage: TokenUsage) -> None:
        self._reserved -= reserved
        self._usage = self._usage + usage
        self._calls += 1


class BudgetedLLM:
    """An :class:`~engram_api.llm.base.LLM` that spends from a :class:`TokenBudget`."""

    def __init__(self, llm: LLM, budget: TokenBudget, *, default_max_output_tokens: int) -> None:
        self._llm = llm
        self.budget = budget
        self._default_output = default_max_output_tokens

    @property
    def model_id(self) -> str:
        return self._llm.model_id

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        json_output: bool = False,
    ) -> Completion:
        output = max_output_tokens or self._default_output
        needed = estimate_prompt_tokens(messages) + output
        self.budget.reserve(needed)
        try:
            completion = await self._llm.complete(
                messages,
                max_output_tokens=output,
                temperature=temperature,
                json_output=json_output,
            )
        except LLMError as exc:
            self.budget.settle(needed, exc.usage)
            raise
        except BaseException:
            self.budget.settle(needed, TokenUsage())
            raise
        self.budget.settle(needed, completion.usage)
        return completion

    async def aclose(self) -> None:
        await self._llm.aclose()

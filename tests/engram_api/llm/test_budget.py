"""The per-run token budget: LLM work stops when it is spent, and the error says so."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr

from engram_api.llm.base import ChatMessage, LLMError
from engram_api.llm.budget import BudgetedLLM, BudgetExhausted, TokenBudget, estimate_prompt_tokens
from engram_api.llm.config import LLMProviderSettings, LLMSettings
from engram_api.llm.factory import build_llm, for_run
from engram_api.resilience import ResilienceSettings
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.scripted import Fault

ASK = [ChatMessage("user", "merge these two memories into one statement")]


def run_llm(api: FakeOpenAI, budget: int, max_output_tokens: int = 20) -> BudgetedLLM:
    config = LLMSettings(
        primary=LLMProviderSettings(
            provider="openai", api_key=SecretStr(api.api_key), base_url=api.base_url
        ),
        resilience=ResilienceSettings(attempts=1),
        max_output_tokens=max_output_tokens,
        run_token_budget=budget,
    )
    chain = build_llm(config)
    assert chain is not None
    return for_run(chain, config)


async def test_calls_are_charged_what_the_provider_reports(fake_openai: FakeOpenAI) -> None:
    llm = run_llm(fake_openai, budget=1000)
    completion = await llm.complete(ASK)
    await llm.complete(ASK)
    await llm.aclose()
    assert llm.budget.used == 2 * completion.usage.total
    assert llm.budget.calls == 2
    assert llm.budget.remaining == 1000 - llm.budget.used


async def test_llm_work_stops_when_the_budget_is_spent_and_says_so(
    fake_openai: FakeOpenAI,
) -> None:
    needed = estimate_prompt_tokens(ASK) + 20
    llm = run_llm(fake_openai, budget=needed + 5)
    await llm.complete(ASK)
    with pytest.raises(BudgetExhausted) as err:
        await llm.complete(ASK)
    await llm.aclose()
    assert len(fake_openai.script.requests) == 1  # the refused call never reached the API
    message = str(err.value)
    assert "LLM token budget for this run is spent" in message
    assert f"of {needed + 5} tokens used" in message
    assert "remaining LLM steps are skipped" in message


async def test_a_zero_budget_refuses_the_first_call(fake_openai: FakeOpenAI) -> None:
    llm = run_llm(fake_openai, budget=0)
    with pytest.raises(BudgetExhausted):
        await llm.complete(ASK)
    await llm.aclose()
    assert fake_openai.script.requests == []
    assert llm.budget.exhausted


async def test_a_failed_call_is_charged_for_the_tokens_it_cost(fake_openai: FakeOpenAI) -> None:
    fake_openai.script.then(
        Fault(
            body={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [],
                "usage": {"prompt_tokens": 30, "completion_tokens": 0, "total_tokens": 30},
            }
        )
    )
    llm = run_llm(fake_openai, budget=1000)
    with pytest.raises(LLMError):
        await llm.complete(ASK)
    await llm.aclose()
    assert llm.budget.used == 30


async def test_concurrent_calls_cannot_overrun_the_budget_together(
    fake_openai: FakeOpenAI,
) -> None:
    needed = estimate_prompt_tokens(ASK) + 20
    llm = run_llm(fake_openai, budget=3 * needed)
    results = await asyncio.gather(*(llm.complete(ASK) for _ in range(6)), return_exceptions=True)
    await llm.aclose()
    assert sum(isinstance(r, BudgetExhausted) for r in results) == 3
    assert len(fake_openai.script.requests) == 3
    assert llm.budget.used <= llm.budget.limit


def test_a_negative_budget_is_rejected() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        TokenBudget(-1)

"""LLM failover at run time: Gemini primary, OpenAI-compatible fallback, both over loopback."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from engram_api.llm.base import ChatMessage, LLMError
from engram_api.llm.config import LLMProviderSettings, LLMSettings
from engram_api.llm.factory import build_llm
from engram_api.resilience import ResilienceSettings
from tests.fakes.clock import FakeClock
from tests.fakes.gemini_api import FakeGemini
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.scripted import Fault

ASK = [ChatMessage("user", "summarise these task logs")]


def settings(gemini: FakeGemini, openai: FakeOpenAI, **resilience: Any) -> LLMSettings:
    knobs: dict[str, Any] = {"attempts": 2, "base_delay_s": 0.0, "breaker_failures": 2}
    knobs.update(resilience)
    return LLMSettings(
        primary=LLMProviderSettings(
            provider="gemini",
            api_key=SecretStr(gemini.api_key),
            base_url=gemini.base_url,
            timeout_s=5,
        ),
        fallback=LLMProviderSettings(
            provider="openai",
            api_key=SecretStr(openai.api_key),
            base_url=openai.base_url,
            model="llama3",
            timeout_s=5,
        ),
        resilience=ResilienceSettings(**knobs),
    )


async def test_the_primary_answers_when_healthy(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    chain = build_llm(settings(fake_gemini, fake_openai))
    assert chain is not None
    completion = await chain.complete(ASK)
    await chain.aclose()
    assert completion.model_id == "gemini/gemini-2.5-flash"
    assert fake_openai.script.requests == []


async def test_a_down_primary_falls_back_to_the_other_provider(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    fake_gemini.script.standing = Fault.error(503)
    chain = build_llm(settings(fake_gemini, fake_openai))
    assert chain is not None
    completion = await chain.complete(ASK)
    await chain.aclose()
    assert completion.model_id == "openai/llama3"
    assert completion.text == "echo: summarise these task logs"
    assert len(fake_gemini.script.requests) == 2


async def test_tokens_spent_on_unusable_answers_are_counted_in_the_call(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    blocked = {
        "candidates": [{"finishReason": "OTHER", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 0},
    }
    fake_gemini.script.then(Fault(body=blocked))
    chain = build_llm(settings(fake_gemini, fake_openai))
    assert chain is not None
    completion = await chain.complete(ASK)
    await chain.aclose()
    # 100 wasted on the first attempt, then 4 in + 5 out on the retry.
    assert completion.usage.input_tokens == 104
    assert completion.usage.output_tokens == 5


async def test_a_dead_primary_is_skipped_until_its_breaker_lets_a_probe_through(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI, clock: FakeClock
) -> None:
    fake_gemini.script.standing = Fault.error(500)
    chain = build_llm(settings(fake_gemini, fake_openai, breaker_reset_s=60), clock=clock)
    assert chain is not None
    for _ in range(5):
        assert (await chain.complete(ASK)).model_id == "openai/llama3"
    assert len(fake_gemini.script.requests) == 2
    clock.advance(61)
    fake_gemini.script.standing = None
    assert (await chain.complete(ASK)).model_id == "gemini/gemini-2.5-flash"
    assert len(fake_gemini.script.requests) == 3
    await chain.aclose()


async def test_a_bad_key_on_the_primary_is_reported_not_hidden(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    config = settings(fake_gemini, fake_openai)
    config.primary.api_key = SecretStr("wrong-key")
    chain = build_llm(config)
    assert chain is not None
    with pytest.raises(LLMError) as err:
        await chain.complete(ASK)
    await chain.aclose()
    assert err.value.retryable is False
    assert "wrong-key" not in str(err.value)
    assert fake_openai.script.requests == []


async def test_when_both_fail_the_error_names_both_and_carries_the_spent_tokens(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    fake_gemini.script.standing = Fault.error(503)
    no_text = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }
    fake_openai.script.standing = Fault(body=no_text)
    chain = build_llm(settings(fake_gemini, fake_openai))
    assert chain is not None
    with pytest.raises(LLMError) as err:
        await chain.complete(ASK)
    await chain.aclose()
    assert "primary gemini/gemini-2.5-flash" in str(err.value)
    assert "fallback openai/llama3" in str(err.value)
    assert err.value.retryable is True
    assert err.value.usage.total == 20  # two malformed answers at 10 tokens each

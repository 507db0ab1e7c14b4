"""Building the LLM chain from ``LLMSettings``; provider ``none`` means no LLM."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from engram_api.llm.base import LLMConfigError
from engram_api.llm.config import LLMProviderSettings, LLMSettings
from engram_api.llm.factory import NO_LLM_REASON, build_llm


def test_no_llm_is_the_default_and_builds_nothing() -> None:
    assert LLMSettings().primary.provider == "none"
    assert build_llm(LLMSettings()) is None
    assert "llm.primary.provider=none" in NO_LLM_REASON


def test_a_fallback_without_a_primary_is_a_config_error() -> None:
    config = LLMSettings(fallback=LLMProviderSettings(provider="openai"))
    with pytest.raises(LLMConfigError, match="configure the primary first"):
        build_llm(config)


def test_gemini_without_a_key_names_the_setting() -> None:
    with pytest.raises(LLMConfigError) as err:
        build_llm(LLMSettings(primary=LLMProviderSettings(provider="gemini")))
    assert str(err.value).startswith("llm.primary: ")
    assert "ENGRAM_LLM__PRIMARY__API_KEY" in str(err.value)


async def test_providers_are_built_in_order_with_their_default_models() -> None:
    config = LLMSettings(
        primary=LLMProviderSettings(provider="gemini", api_key=SecretStr("k")),
        fallback=LLMProviderSettings(provider="openai", base_url="http://127.0.0.1:9/v1"),
    )
    chain = build_llm(config)
    assert chain is not None
    assert chain.model_ids == ["gemini/gemini-2.5-flash", "openai/gpt-4.1-mini"]
    await chain.aclose()


def test_keys_are_secret_in_settings() -> None:
    config = LLMSettings(
        primary=LLMProviderSettings(provider="gemini", api_key=SecretStr("AIza-secret-value"))
    )
    assert "AIza-secret-value" not in repr(config)
    assert "AIza-secret-value" not in config.model_dump_json()

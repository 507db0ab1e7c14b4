"""LLM configuration (a section of the process settings, ``ENGRAM_LLM__*``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from engram_api.resilience import ResilienceSettings

LLMProviderName = Literal["none", "gemini", "openai"]


class LLMProviderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # none: no LLM; maintenance reports its LLM steps as skipped.
    provider: LLMProviderName = "none"
    # Empty means the provider's default (gemini-2.5-flash, gpt-4.1-mini).
    model: str = Field(default="", max_length=256)
    base_url: str = Field(default="", max_length=2048)
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    # openai: the request field that limits output. OpenAI's newer models want
    # max_completion_tokens; many compatible servers only know max_tokens.
    output_limit_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"


class LLMSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    primary: LLMProviderSettings = Field(default_factory=LLMProviderSettings)
    fallback: LLMProviderSettings | None = None
    resilience: ResilienceSettings = Field(
        # Chat calls are slow and costly: retry less eagerly than embeddings.
        default_factory=lambda: ResilienceSettings(attempts=3, base_delay_s=1.0, max_delay_s=10.0)
    )
    # Default output limit per call and sampling temperature (callers may override per call).
    max_output_tokens: int = Field(default=1024, ge=1, le=65536)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    # Tokens (input + output, all providers) one maintenance run may spend; 0 = no LLM work.
    run_token_budget: int = Field(default=200_000, ge=0, le=100_000_000)

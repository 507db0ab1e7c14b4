"""Build the LLM chain from settings; ``None`` when no LLM is configured.

Providers are imported only when configured, so a missing optional SDK matters only to whoever
chose that provider. A maintenance run wraps the chain in a fresh
:class:`~engram_api.llm.budget.BudgetedLLM` (see :func:`for_run`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from engram_api.llm.base import LLM, LLMConfigError
from engram_api.llm.budget import BudgetedLLM, TokenBudget
from engram_api.llm.chain import LLMChain
from engram_api.llm.config import LLMProviderSettings, LLMSettings

NO_LLM_REASON = "no LLM configured (llm.primary.provider=none)"
_EXTRAS = {"gemini": ("google-genai", "gemini"), "openai": ("openai", "openai")}


def build_provider(p: LLMProviderSettings, settings: LLMSettings, role: str = "primary") -> LLM:
    key = p.api_key.get_secret_value() if p.api_key is not None else None
    try:
        if p.provider == "gemini":
            from engram_api.llm.gemini import GeminiLLM

            return GeminiLLM(
                api_key=key or "",
                model=p.model,
                base_url=p.base_url,
                timeout_s=p.timeout_s,
                max_output_tokens=settings.max_output_tokens,
                temperature=settings.temperature,
            )
        if p.provider == "openai":
            from engram_api.llm.openai_compat import OpenAICompatLLM

            return OpenAICompatLLM(
                api_key=key,
                model=p.model,
                base_url=p.base_url,
                timeout_s=p.timeout_s,
                max_output_tokens=settings.max_output_tokens,
                temperature=settings.temperature,
                output_limit_param=p.output_limit_param,
            )
    except ImportError as exc:
        package, extra = _EXTRAS.get(p.provider, (exc.name or "?", ""))
        raise LLMConfigError(
            f"llm.{role}.provider={p.provider} needs the {package} package "
            f"(pip install 'engram[{extra}]')"
        ) from None
    except LLMConfigError as exc:
        raise LLMConfigError(f"llm.{role}: {exc}") from None
    raise LLMConfigError(f"llm.{role}.provider=none cannot be part of a chain")


def build_llm(
    settings: LLMSettings,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> LLMChain | None:
    """The chain for ``settings``, or ``None`` for provider ``none`` (see :data:`NO_LLM_REASON`)."""
    if settings.primary.provider == "none":
        if settings.fallback is not None and settings.fallback.provider != "none":
            raise LLMConfigError(
                "llm.fallback is set but llm.primary.provider=none: configure the primary first"
            )
        return None
    providers = [build_provider(settings.primary, settings, "primary")]
    if settings.fallback is not None and settings.fallback.provider != "none":
        providers.append(build_provider(settings.fallback, settings, "fallback"))
    return LLMChain(providers, settings=settings.resilience, clock=clock, sleep=sleep, rng=rng)


def for_run(llm: LLM, settings: LLMSettings) -> BudgetedLLM:
    """The LLM one maintenance run uses: ``llm`` spending from a fresh per-run budget."""
    return BudgetedLLM(
        llm,
        TokenBudget(settings.run_token_budget),
        default_max_output_tokens=settings.max_output_tokens,
    )

"""Build the embedder chain from settings.

Providers are imported only when configured, so a missing optional SDK (google-genai, openai)
matters only to whoever chose that provider, and the test embedder does not load onnxruntime.
Building is blocking (the local model loads in well under a second): call it at startup, or
through ``asyncio.to_thread`` from a running loop.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from engram_api.embeddings.base import Embedder, EmbeddingConfigError
from engram_api.embeddings.chain import EmbedderChain
from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.whole import whole

_EXTRAS = {"gemini": ("google-genai", "gemini"), "openai": ("openai", "openai")}


def _key(p: ProviderSettings) -> str | None:
    return p.api_key.get_secret_value() if p.api_key is not None else None


def build_provider(p: ProviderSettings, role: str = "primary") -> Embedder:
    try:
        if p.provider == "local":
            return _build_local(p)
        if p.provider == "hash":
            from engram_api.embeddings.hashing import HashingEmbedder

            return HashingEmbedder(p.dimension or 384)
        if p.provider == "gemini":
            from engram_api.embeddings.gemini import GeminiEmbedder

            return GeminiEmbedder(
                api_key=_key(p) or "",
                model=p.model,
                dimension=p.dimension,
                base_url=p.base_url,
                timeout_s=p.timeout_s,
                batch_size=p.batch_size,
            )
        from engram_api.embeddings.openai_compat import OpenAICompatEmbedder

        return OpenAICompatEmbedder(
            api_key=_key(p),
            model=p.model,
            dimension=p.dimension,
            base_url=p.base_url,
            timeout_s=p.timeout_s,
            batch_size=p.batch_size,
        )
    except ImportError as exc:
        package, extra = _EXTRAS.get(p.provider, (exc.name or "?", ""))
        hint = f"pip install 'engram[{extra}]'" if extra else f"pip install {package}"
        raise EmbeddingConfigError(
            f"embeddings.{role}.provider={p.provider} needs the {package} package ({hint})"
        ) from None
    except EmbeddingConfigError as exc:
        # Name the settings section: providers speak of "the provider's dimension".
        raise EmbeddingConfigError(f"embeddings.{role}: {exc}") from None


def local_model(name: str) -> str:
    """The local model id a ``model`` setting names ("" = the default for new collections)."""
    from engram_api.embeddings.local import MODEL_ID as MINILM
    from engram_api.embeddings.multilingual import MODEL_ID as E5

    # MiniLM stays the default for new collections until the multilingual model meets its own
    # goals here (docs/embeddings.md: Chinese top-1 0.59 dense vs 0.90 asked, ~2x the query
    # cost) and maintenance has a calibrated similarity profile for it; e5 is opt-in by name.
    wanted = name.removeprefix("local/")
    if wanted in ("", MINILM.removeprefix("local/")):
        return MINILM
    if wanted == E5.removeprefix("local/"):
        return E5
    raise EmbeddingConfigError(
        f"model={name!r} is not a local model: use {MINILM.removeprefix('local/')} (the "
        f"default, English) or {E5.removeprefix('local/')} (multilingual: Chinese and English)"
    )


def _build_local(p: ProviderSettings) -> Embedder:
    from engram_api.embeddings.local import MODEL_ID as MINILM
    from engram_api.embeddings.local import LocalEmbedder
    from engram_api.embeddings.multilingual import MultilingualEmbedder

    if p.dimension not in (0, 384):
        raise EmbeddingConfigError(
            f"dimension={p.dimension}, but the local models give 384 (set 0 or 384)"
        )
    if local_model(p.model) == MINILM:
        return LocalEmbedder.load(
            model_path=p.model_path,
            tokenizer_path=p.tokenizer_path,
            batch_size=p.batch_size,
            threads=p.threads,
            compute=p.compute,
        )
    if p.tokenizer_path:
        raise EmbeddingConfigError(
            "tokenizer_path applies to all-MiniLM-L6-v2-int8 only: the multilingual model's "
            "tokenizer is inside its model file"
        )
    return MultilingualEmbedder.load_e5(
        model_path=p.model_path, batch_size=p.batch_size, threads=p.threads, compute=p.compute
    )


def build_embedder(
    settings: EmbeddingSettings,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> EmbedderChain:
    """The chain for ``settings``; raises :class:`EmbeddingConfigError` with what to change."""
    # Every provider that declares its token window embeds long content whole (chunked).
    providers = [whole(build_provider(settings.primary, "primary"))]
    if settings.fallback is not None:
        providers.append(whole(build_provider(settings.fallback, "fallback")))
    return EmbedderChain(providers, settings=settings.resilience, clock=clock, sleep=sleep, rng=rng)

"""Primary then fallback at run time, through the real SDKs against loopback fake APIs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import SecretStr

from engram_api.embeddings.base import EmbeddingConfigError, EmbeddingError
from engram_api.embeddings.chain import EmbedderChain
from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.factory import build_embedder
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.resilience import ResilienceSettings
from tests.fakes.clock import FakeClock
from tests.fakes.gemini_api import FakeGemini
from tests.fakes.loopback import closed_port_url
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.scripted import Fault

DIM = 16


def settings(
    gemini: FakeGemini | None,
    openai: FakeOpenAI,
    *,
    timeout_s: float = 5.0,
    **resilience: Any,
) -> EmbeddingSettings:
    primary = ProviderSettings(
        provider="gemini",
        api_key=SecretStr(gemini.api_key if gemini else "k"),
        base_url=gemini.base_url if gemini else closed_port_url(),
        dimension=DIM,
        timeout_s=timeout_s,
    )
    fallback = ProviderSettings(
        provider="openai",
        api_key=SecretStr(openai.api_key),
        base_url=openai.base_url,
        model="local-embedder",
        dimension=DIM,
    )
    knobs: dict[str, Any] = {"attempts": 3, "base_delay_s": 0.0, "breaker_failures": 3}
    knobs.update(resilience)
    return EmbeddingSettings(
        primary=primary, fallback=fallback, resilience=ResilienceSettings(**knobs)
    )


async def test_a_healthy_primary_answers_and_the_fallback_is_not_called(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    chain = build_embedder(settings(fake_gemini, fake_openai))
    result = await chain.embed_documents_with_model(["a", "b"])
    vector, model = await chain.embed_query_with_model("c")
    await chain.aclose()
    assert result.model_id == model == "gemini/gemini-embedding-001" == chain.model_id
    assert len(result.vectors) == 2
    assert vector.shape == (DIM,)
    assert fake_openai.script.requests == []


async def test_a_down_primary_falls_back_and_the_answering_model_is_recorded(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    fake_gemini.script.standing = Fault.error(503)
    chain = build_embedder(settings(fake_gemini, fake_openai))
    result = await chain.embed_documents_with_model(["a", "b"])
    await chain.aclose()
    assert result.model_id == "openai/local-embedder"
    # The chain's own model stays the primary's: that is what the collection is built with.
    assert chain.model_id == "gemini/gemini-embedding-001"
    assert len(fake_gemini.script.requests) == 3  # retried before giving up
    assert len(fake_openai.script.requests) == 1


@pytest.mark.parametrize(
    "fault",
    [Fault.error(429), Fault.error(500), Fault(hang=True), Fault(drop=True), Fault(raw=b"<html>")],
    ids=["429", "500", "timeout", "dropped", "malformed"],
)
async def test_a_transient_failure_is_retried_on_the_primary(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI, fault: Fault
) -> None:
    fake_gemini.script.then(fault)
    chain = build_embedder(settings(fake_gemini, fake_openai, timeout_s=0.3))
    _, model = await chain.embed_query_with_model("x")
    await chain.aclose()
    assert model == "gemini/gemini-embedding-001"
    assert len(fake_gemini.script.requests) == 2
    assert fake_openai.script.requests == []


async def test_an_unreachable_primary_falls_back(fake_openai: FakeOpenAI) -> None:
    chain = build_embedder(settings(None, fake_openai))
    _, model = await chain.embed_query_with_model("x")
    await chain.aclose()
    assert model == "openai/local-embedder"


async def test_a_dead_primary_costs_one_probe_per_reset_period(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI, clock: FakeClock
) -> None:
    fake_gemini.script.standing = Fault.error(503)
    chain = build_embedder(
        settings(fake_gemini, fake_openai, breaker_failures=2, breaker_reset_s=30),
        clock=clock,
    )
    # The first call spends the retries until the breaker opens (2 failures), then falls back.
    await chain.embed_query("first")
    assert len(fake_gemini.script.requests) == 2
    assert chain.status()[0].breaker == "open"

    for i in range(10):
        _, model = await chain.embed_query_with_model(f"q{i}")
        assert model == "openai/local-embedder"
    assert len(fake_gemini.script.requests) == 2  # skipped: no request while open

    clock.advance(31)
    await chain.embed_query("probe while still down")
    assert len(fake_gemini.script.requests) == 3  # exactly one probe, no retries
    assert chain.status()[0].breaker == "open"

    fake_gemini.script.standing = None  # the primary recovers
    await chain.embed_query("not yet probed")
    assert len(fake_gemini.script.requests) == 3
    clock.advance(31)
    _, model = await chain.embed_query_with_model("probe after recovery")
    assert model == "gemini/gemini-embedding-001"
    assert chain.status()[0].breaker == "closed"
    await chain.aclose()


async def test_concurrent_calls_during_a_probe_go_to_the_fallback(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI, clock: FakeClock
) -> None:
    fake_gemini.script.standing = Fault.error(503)
    chain = build_embedder(
        settings(fake_gemini, fake_openai, timeout_s=0.5, breaker_failures=1), clock=clock
    )
    await chain.embed_query("open the breaker")
    fake_gemini.script.standing = Fault(hang=True)
    clock.advance(31)
    before = len(fake_gemini.script.requests)
    results = await asyncio.gather(*(chain.embed_query_with_model(f"q{i}") for i in range(6)))
    await chain.aclose()
    assert len(fake_gemini.script.requests) - before == 1
    assert {model for _, model in results} == {"openai/local-embedder"}


async def test_a_rejected_request_is_not_hidden_by_the_fallback(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    fake_gemini.script.then(Fault.error(400, "text too long"))
    chain = build_embedder(settings(fake_gemini, fake_openai))
    with pytest.raises(EmbeddingError, match="text too long") as err:
        await chain.embed_query("x")
    await chain.aclose()
    assert err.value.retryable is False
    assert len(fake_gemini.script.requests) == 1
    assert fake_openai.script.requests == []


async def test_when_every_provider_fails_the_error_names_each_and_is_retryable(
    fake_gemini: FakeGemini, fake_openai: FakeOpenAI
) -> None:
    fake_gemini.script.standing = Fault.error(503)
    fake_openai.script.standing = Fault.error(429)
    chain = build_embedder(settings(fake_gemini, fake_openai, attempts=2))
    with pytest.raises(EmbeddingError) as err:
        await chain.embed_documents(["a"])
    await chain.aclose()
    message = str(err.value)
    assert "primary gemini/gemini-embedding-001" in message
    assert "fallback openai/local-embedder" in message
    assert "HTTP 503" in message
    assert "HTTP 429" in message
    assert err.value.retryable is True
    assert fake_gemini.api_key not in message
    assert fake_openai.api_key not in message


async def test_no_texts_make_no_request(fake_gemini: FakeGemini, fake_openai: FakeOpenAI) -> None:
    chain = build_embedder(settings(fake_gemini, fake_openai))
    assert (await chain.embed_documents_with_model([])).vectors == []
    await chain.aclose()
    assert fake_gemini.script.requests == []


def test_providers_of_different_dimensions_are_a_startup_error() -> None:
    config = EmbeddingSettings(
        primary=ProviderSettings(provider="hash", dimension=384),
        fallback=ProviderSettings(
            provider="openai", model="text-embedding-3-small", base_url=closed_port_url()
        ),
    )
    with pytest.raises(EmbeddingConfigError) as err:
        build_embedder(config)
    message = str(err.value)
    assert "primary hash/384 gives 384" in message
    assert "fallback openai/text-embedding-3-small gives 1536" in message
    assert "set the fallback's dimension to 384" in message


def test_a_collection_built_with_another_model_is_a_startup_error() -> None:
    chain = EmbedderChain([HashingEmbedder(384)])
    chain.check_collection(collection="memories", dimension=384, model_id="hash/384")
    with pytest.raises(EmbeddingConfigError, match="engram reembed --to hash/384"):
        chain.check_collection(
            collection="memories", dimension=384, model_id="local/all-MiniLM-L6-v2-int8"
        )
    with pytest.raises(EmbeddingConfigError, match="holds 768-d vectors"):
        chain.check_collection(collection="memories", dimension=768, model_id=None)


def test_a_chain_has_a_primary_and_at_most_one_fallback() -> None:
    with pytest.raises(EmbeddingConfigError):
        EmbedderChain([])
    with pytest.raises(EmbeddingConfigError):
        EmbedderChain([HashingEmbedder(8)] * 3)

"""Building the embedder chain from settings and ``ENGRAM_EMBEDDINGS__*`` variables."""

from __future__ import annotations

import pytest

from engram_api.embeddings.base import EmbeddingConfigError
from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.factory import build_embedder
from engram_api.settings import load_settings
from tests.fakes.openai_api import FakeOpenAI


async def test_the_default_is_the_local_minilm_model_with_no_fallback() -> None:
    chain = build_embedder(EmbeddingSettings())
    assert chain.model_id == "local/all-MiniLM-L6-v2-int8"
    assert chain.model_ids == ["local/all-MiniLM-L6-v2-int8"]
    assert chain.dimension == 384
    assert (await chain.embed_query("hello")).shape == (384,)
    await chain.aclose()


@pytest.mark.parametrize("name", ["multilingual-e5-small-q4", "local/multilingual-e5-small-q4"])
async def test_the_multilingual_model_is_built_when_named(name: str) -> None:
    chain = build_embedder(EmbeddingSettings(primary=ProviderSettings(model=name)))
    assert chain.model_id == "local/multilingual-e5-small-q4"
    await chain.aclose()


def test_an_unknown_local_model_is_refused_naming_the_field_and_the_choices() -> None:
    with pytest.raises(EmbeddingConfigError) as err:
        build_embedder(EmbeddingSettings(primary=ProviderSettings(model="bge-m3")))
    assert "embeddings.primary" in str(err.value)
    assert "multilingual-e5-small-q4" in str(err.value)
    assert "all-MiniLM-L6-v2-int8" in str(err.value)


async def test_the_hash_provider_takes_its_dimension_from_settings() -> None:
    chain = build_embedder(
        EmbeddingSettings(primary=ProviderSettings(provider="hash", dimension=64))
    )
    assert (chain.model_id, chain.dimension) == ("hash/64", 64)
    await chain.aclose()


async def test_environment_variables_configure_a_remote_primary_with_a_local_fallback(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER", "openai")
    monkeypatch.setenv("ENGRAM_EMBEDDINGS__PRIMARY__BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("ENGRAM_EMBEDDINGS__PRIMARY__API_KEY", fake_openai.api_key)
    monkeypatch.setenv("ENGRAM_EMBEDDINGS__PRIMARY__MODEL", "text-embedding-3-small")
    monkeypatch.setenv("ENGRAM_EMBEDDINGS__PRIMARY__DIMENSION", "384")
    monkeypatch.setenv("ENGRAM_EMBEDDINGS__FALLBACK__PROVIDER", "local")
    monkeypatch.setenv("ENGRAM_EMBEDDINGS__RESILIENCE__ATTEMPTS", "1")
    settings = load_settings()
    assert settings.embeddings.resilience.attempts == 1
    assert fake_openai.api_key not in repr(settings)
    chain = build_embedder(settings.embeddings)
    assert chain.model_ids == ["openai/text-embedding-3-small", "local/all-MiniLM-L6-v2-int8"]
    vector, model = await chain.embed_query_with_model("hello")
    assert (model, vector.shape) == ("openai/text-embedding-3-small", (384,))
    assert fake_openai.bodies("/v1/embeddings")[0]["dimensions"] == 384
    await chain.aclose()


def test_a_gemini_provider_without_a_key_names_the_setting_to_set() -> None:
    with pytest.raises(EmbeddingConfigError) as err:
        build_embedder(EmbeddingSettings(primary=ProviderSettings(provider="gemini")))
    assert str(err.value).startswith("embeddings.primary: ")
    assert "ENGRAM_EMBEDDINGS__PRIMARY__API_KEY" in str(err.value)


def test_the_local_model_refuses_another_dimension() -> None:
    with pytest.raises(EmbeddingConfigError, match=r"embeddings.fallback: dimension=768"):
        build_embedder(
            EmbeddingSettings(
                primary=ProviderSettings(provider="hash", dimension=768),
                fallback=ProviderSettings(provider="local", dimension=768),
            )
        )


def test_a_wrong_local_model_path_is_a_startup_error() -> None:
    with pytest.raises(
        EmbeddingConfigError, match=r"embeddings\.primary: local embedder model file"
    ):
        build_embedder(
            EmbeddingSettings(primary=ProviderSettings(provider="local", model_path="/nonexistent"))
        )

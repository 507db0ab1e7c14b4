"""The Gemini embedder through the real google-genai SDK against a loopback fake API."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from engram_api.embeddings.base import EmbeddingConfigError, EmbeddingError
from engram_api.embeddings.gemini import GeminiEmbedder
from engram_api.embeddings.hashing import HashingEmbedder
from tests.fakes.gemini_api import FakeGemini
from tests.fakes.loopback import closed_port_url
from tests.fakes.scripted import Fault

BATCH = "batchEmbedContents"


def embedder(api: FakeGemini, **kw: object) -> GeminiEmbedder:
    args: dict[str, object] = {
        "api_key": api.api_key,
        "base_url": api.base_url,
        "dimension": 768,
        "timeout_s": 5.0,
    }
    args.update(kw)
    return GeminiEmbedder(**args)  # type: ignore[arg-type]


async def test_documents_and_queries_use_retrieval_task_types(fake_gemini: FakeGemini) -> None:
    e = embedder(fake_gemini)
    texts = ["the cat sat", "deploy on friday"]
    docs = await e.embed_documents(texts)
    query = await e.embed_query("where is the cat")
    await e.aclose()
    ref = HashingEmbedder(768)
    assert all(
        np.allclose(v, ref.embed_one(t), atol=1e-6) for t, v in zip(texts, docs, strict=True)
    )
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    doc_body, query_body = fake_gemini.bodies(BATCH)
    assert [r["taskType"] for r in doc_body["requests"]] == ["RETRIEVAL_DOCUMENT"] * 2
    assert [r["content"]["parts"][0]["text"] for r in doc_body["requests"]] == texts
    assert query_body["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    assert {r["outputDimensionality"] for r in doc_body["requests"]} == {768}
    assert e.model_id == "gemini/gemini-embedding-001"


async def test_the_native_dimension_is_not_requested(fake_gemini: FakeGemini) -> None:
    e = embedder(fake_gemini, dimension=0)
    assert e.dimension == 3072
    assert (await e.embed_query("x")).shape == (3072,)
    await e.aclose()
    assert "outputDimensionality" not in fake_gemini.bodies(BATCH)[0]["requests"][0]


async def test_the_key_travels_in_the_api_key_header(fake_gemini: FakeGemini) -> None:
    e = embedder(fake_gemini)
    await e.embed_query("x")
    await e.aclose()
    request = fake_gemini.script.requests[0]
    assert request.headers["x-goog-api-key"] == fake_gemini.api_key
    assert fake_gemini.api_key not in request.path


async def test_many_texts_are_split_into_requests_of_batch_size(fake_gemini: FakeGemini) -> None:
    e = embedder(fake_gemini, batch_size=3)
    vectors = await e.embed_documents([f"t{i}" for i in range(7)])
    await e.aclose()
    assert len(vectors) == 7
    assert [len(b["requests"]) for b in fake_gemini.bodies(BATCH)] == [3, 3, 1]


def test_a_missing_key_is_a_config_error_that_names_the_setting() -> None:
    with pytest.raises(EmbeddingConfigError, match="ENGRAM_EMBEDDINGS__PRIMARY__API_KEY"):
        GeminiEmbedder(api_key="")


def test_a_model_of_unknown_dimension_needs_one_configured() -> None:
    with pytest.raises(EmbeddingConfigError, match="DIMENSION"):
        GeminiEmbedder(api_key="k", model="future-embedding-model")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"embeddings": []}, "0 vectors for 1 texts"),
        ({}, "0 vectors for 1 texts"),
        ({"embeddings": [{"values": [1.0, 2.0, 3.0]}]}, "dimension 3, configured 768"),
        ({"embeddings": [{"values": "not a list"}]}, "unusable answer"),
    ],
)
async def test_an_unusable_answer_is_a_malformed_error(
    fake_gemini: FakeGemini, body: object, message: str
) -> None:
    fake_gemini.script.then(Fault(body=body))
    e = embedder(fake_gemini)
    with pytest.raises(EmbeddingError, match=message) as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == ("malformed", True)


async def test_a_non_json_answer_is_a_malformed_error(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.then(Fault(raw=b"upstream connect error"))
    e = embedder(fake_gemini)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert err.value.kind == "malformed"


@pytest.mark.parametrize(
    ("status", "kind"), [(429, "rate_limited"), (500, "server"), (503, "server")]
)
async def test_quota_and_server_errors_are_retryable_and_the_sdk_does_not_retry(
    fake_gemini: FakeGemini, status: int, kind: str
) -> None:
    fake_gemini.script.then(Fault.error(status, "try later"))
    e = embedder(fake_gemini)
    with pytest.raises(EmbeddingError, match=f"HTTP {status}") as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == (kind, True)
    assert len(fake_gemini.script.requests) == 1


async def test_a_wrong_key_fails_without_retry_and_never_shows_the_key(
    fake_gemini: FakeGemini, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "AIzaSy-live-0123456789"
    e = embedder(fake_gemini, api_key=secret)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert err.value.retryable is False
    assert "API key not valid" in str(err.value)
    assert secret not in str(err.value)
    assert err.value.__cause__ is None
    assert secret not in caplog.text


async def test_a_hung_server_is_a_timeout(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.then(Fault(hang=True))
    e = embedder(fake_gemini, timeout_s=0.3)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == ("timeout", True)
    assert len(fake_gemini.script.requests) == 1


async def test_a_dropped_connection_is_a_connection_error(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.then(Fault(drop=True))
    e = embedder(fake_gemini)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == ("connection", True)
    assert len(fake_gemini.script.requests) == 1


async def test_nothing_listening_is_a_connection_error() -> None:
    e = GeminiEmbedder(api_key="k", base_url=closed_port_url(), dimension=8, model="m")
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == ("connection", True)

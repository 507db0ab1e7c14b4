"""The OpenAI-compatible embedder through the real openai SDK against a loopback fake API."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from engram_api.embeddings.base import EmbeddingConfigError, EmbeddingError
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.embeddings.openai_compat import OpenAICompatEmbedder
from tests.fakes.loopback import closed_port_url
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.scripted import Fault

PATH = "/v1/embeddings"


def embedder(api: FakeOpenAI, **kw: object) -> OpenAICompatEmbedder:
    args: dict[str, object] = {
        "api_key": api.api_key,
        "base_url": api.base_url,
        "model": "nomic-embed-text",
        "dimension": api.dimension,
        "timeout_s": 5.0,
    }
    args.update(kw)
    return OpenAICompatEmbedder(**args)  # type: ignore[arg-type]


async def test_documents_come_back_in_order_as_unit_vectors(fake_openai: FakeOpenAI) -> None:
    e = embedder(fake_openai)
    texts = ["the cat sat", "deploy on friday", "tea over coffee"]
    vectors = await e.embed_documents(texts)
    await e.aclose()
    reference = HashingEmbedder(fake_openai.dimension)
    for text, vec in zip(texts, vectors, strict=True):
        assert vec.dtype == np.float32
        assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
        assert np.allclose(vec, reference.embed_one(text), atol=1e-6)
    assert fake_openai.bodies(PATH) == [
        {"model": "nomic-embed-text", "input": texts, "encoding_format": "float"}
    ]


async def test_the_key_is_sent_as_a_bearer_token(fake_openai: FakeOpenAI) -> None:
    e = embedder(fake_openai)
    await e.embed_query("hello")
    await e.aclose()
    assert fake_openai.script.requests[0].headers["authorization"] == "Bearer sk-test-key"


async def test_dimensions_are_requested_only_from_models_that_can_shorten(
    fake_openai: FakeOpenAI,
) -> None:
    shortened = embedder(fake_openai, model="text-embedding-3-small", dimension=256)
    native = embedder(fake_openai, model="text-embedding-3-small", dimension=0)
    custom = embedder(fake_openai, model="bge-small", dimension=16)
    assert (shortened.dimension, native.dimension, custom.dimension) == (256, 1536, 16)
    assert (await shortened.embed_query("x")).shape == (256,)
    await native.embed_query("x")
    await custom.embed_query("x")
    for e in (shortened, native, custom):
        await e.aclose()
    bodies = fake_openai.bodies(PATH)
    assert bodies[0]["dimensions"] == 256
    assert "dimensions" not in bodies[1]
    assert "dimensions" not in bodies[2]


def test_a_model_of_unknown_dimension_needs_one_configured() -> None:
    with pytest.raises(EmbeddingConfigError, match="DIMENSION"):
        OpenAICompatEmbedder(api_key=None, model="some-local-model", base_url="http://127.0.0.1:9")


async def test_many_texts_are_split_into_requests_of_batch_size(fake_openai: FakeOpenAI) -> None:
    e = embedder(fake_openai, batch_size=2)
    texts = [f"text {i}" for i in range(5)]
    vectors = await e.embed_documents(texts)
    await e.aclose()
    assert [len(b["input"]) for b in fake_openai.bodies(PATH)] == [2, 2, 1]
    reference = HashingEmbedder(fake_openai.dimension)
    assert all(
        np.allclose(v, reference.embed_one(t), atol=1e-6)
        for t, v in zip(texts, vectors, strict=True)
    )


async def test_rows_answered_out_of_order_are_matched_by_index(fake_openai: FakeOpenAI) -> None:
    ref = HashingEmbedder(fake_openai.dimension)
    rows = [
        {"object": "embedding", "index": 1, "embedding": ref.embed_one("b").tolist()},
        {"object": "embedding", "index": 0, "embedding": ref.embed_one("a").tolist()},
    ]
    fake_openai.script.then(Fault(body={"object": "list", "data": rows, "model": "m"}))
    e = embedder(fake_openai)
    a, b = await e.embed_documents(["a", "b"])
    await e.aclose()
    assert np.allclose(a, ref.embed_one("a"), atol=1e-6)
    assert np.allclose(b, ref.embed_one("b"), atol=1e-6)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"object": "list", "data": [], "model": "m"}, "indexes do not match"),
        (
            {"object": "list", "model": "m", "data": [{"index": 0, "embedding": [1.0, 2.0]}]},
            "dimension 2, configured 16",
        ),
        (
            {"object": "list", "model": "m", "data": [{"index": 0, "embedding": [0.0] * 16}]},
            "zero or non-finite",
        ),
        ({"unexpected": True}, "unusable answer"),
    ],
)
async def test_an_unusable_answer_is_a_malformed_error(
    fake_openai: FakeOpenAI, body: object, message: str
) -> None:
    fake_openai.script.then(Fault(body=body))
    e = embedder(fake_openai)
    with pytest.raises(EmbeddingError, match=message) as err:
        await e.embed_query("x")
    await e.aclose()
    assert err.value.kind == "malformed"
    assert err.value.retryable


async def test_a_non_json_answer_is_a_malformed_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script.then(Fault(raw=b"<html>gateway</html>"))
    e = embedder(fake_openai)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert err.value.kind == "malformed"


@pytest.mark.parametrize(
    ("status", "kind"), [(429, "rate_limited"), (500, "server"), (503, "server"), (408, "timeout")]
)
async def test_overload_and_server_errors_are_retryable(
    fake_openai: FakeOpenAI, status: int, kind: str
) -> None:
    fake_openai.script.then(Fault.error(status))
    e = embedder(fake_openai)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == (kind, True)
    assert f"HTTP {status}" in str(err.value)


async def test_the_sdk_does_not_retry_behind_the_chains_back(fake_openai: FakeOpenAI) -> None:
    fake_openai.script.then(Fault.error(503))
    e = embedder(fake_openai)
    with pytest.raises(EmbeddingError):
        await e.embed_query("x")
    await e.aclose()
    assert len(fake_openai.script.requests) == 1


async def test_a_rejected_request_is_not_retryable(fake_openai: FakeOpenAI) -> None:
    fake_openai.script.then(Fault.error(400, "input too long"))
    e = embedder(fake_openai)
    with pytest.raises(EmbeddingError, match="input too long") as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == ("invalid_request", False)


async def test_a_wrong_key_is_an_auth_error_that_never_shows_the_key(
    fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-live-0123456789abcdef"
    e = embedder(fake_openai, api_key=secret)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    # The fake echoes the key it was given, as real APIs partly do.
    assert secret in fake_openai.script.requests[0].headers["authorization"]
    assert (err.value.kind, err.value.retryable) == ("auth", False)
    assert secret not in str(err.value)
    assert secret not in repr(err.value)
    assert err.value.__cause__ is None
    assert secret not in caplog.text


async def test_a_hung_server_is_a_timeout(fake_openai: FakeOpenAI) -> None:
    fake_openai.script.then(Fault(hang=True))
    e = embedder(fake_openai, timeout_s=0.3)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == ("timeout", True)


async def test_a_dropped_connection_is_a_connection_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script.then(Fault(drop=True))
    e = embedder(fake_openai)
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == ("connection", True)


async def test_nothing_listening_is_a_connection_error() -> None:
    e = OpenAICompatEmbedder(
        api_key=None, base_url=closed_port_url() + "/v1", model="m", dimension=8
    )
    with pytest.raises(EmbeddingError) as err:
        await e.embed_query("x")
    await e.aclose()
    assert (err.value.kind, err.value.retryable) == ("connection", True)

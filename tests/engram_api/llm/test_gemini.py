"""The Gemini LLM through the real google-genai SDK against a loopback fake chat API."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from engram_api.llm.base import ChatMessage, LLMConfigError, LLMError
from engram_api.llm.gemini import GeminiLLM
from tests.fakes.gemini_api import FakeGemini
from tests.fakes.scripted import Fault

GEN = "generateContent"
ASK = [
    ChatMessage("system", "Answer in JSON."),
    ChatMessage("user", "first question"),
    ChatMessage("assistant", "first answer"),
    ChatMessage("user", "Are these two the same?"),
]


def llm(api: FakeGemini, **kw: Any) -> GeminiLLM:
    args: dict[str, Any] = {"api_key": api.api_key, "base_url": api.base_url, "timeout_s": 5.0}
    args.update(kw)
    return GeminiLLM(**args)


def answer(
    parts: list[dict[str, Any]] | None, finish: str = "STOP", **extra: Any
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"finishReason": finish, "index": 0}
    if parts is not None:
        candidate["content"] = {"parts": parts, "role": "model"}
    return {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": 20,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 30,
            "totalTokenCount": 55,
        },
        **extra,
    }


async def test_a_chat_maps_roles_and_returns_text_and_tokens(fake_gemini: FakeGemini) -> None:
    model = llm(fake_gemini)
    completion = await model.complete(ASK, json_output=True, max_output_tokens=64)
    await model.aclose()
    assert completion.text == "echo: Are these two the same?"
    assert completion.model_id == "gemini/gemini-2.5-flash"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (9, 6)
    body = fake_gemini.bodies(GEN)[0]
    assert body["systemInstruction"]["parts"] == [{"text": "Answer in JSON."}]
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["generationConfig"] == {
        "temperature": 0.0,
        "maxOutputTokens": 64,
        "responseMimeType": "application/json",
    }
    assert fake_gemini.script.requests[0].path.endswith("/models/gemini-2.5-flash:generateContent")


async def test_thinking_tokens_count_as_output_and_thoughts_are_not_the_answer(
    fake_gemini: FakeGemini,
) -> None:
    parts: list[dict[str, Any]] = [
        {"text": "let me think", "thought": True},
        {"text": '{"same": true}'},
    ]
    fake_gemini.script.then(Fault(body=answer(parts)))
    model = llm(fake_gemini)
    completion = await model.complete(ASK)
    await model.aclose()
    assert completion.text == '{"same": true}'
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (20, 35)


async def test_an_answer_cut_by_the_token_limit_is_marked_truncated(
    fake_gemini: FakeGemini,
) -> None:
    fake_gemini.script.then(Fault(body=answer([{"text": '{"sa'}], finish="MAX_TOKENS")))
    model = llm(fake_gemini)
    completion = await model.complete(ASK)
    await model.aclose()
    assert (completion.text, completion.truncated) == ('{"sa', True)


@pytest.mark.parametrize(
    ("body", "kind", "message"),
    [
        (
            {"candidates": [], "usageMetadata": {"promptTokenCount": 20}},
            "malformed",
            "no candidates",
        ),
        (answer(None, finish="STOP"), "malformed", "no text"),
        (answer(None, finish="MAX_TOKENS"), "invalid_request", "raise max_output_tokens"),
        (answer([{"text": "thinking only", "thought": True}]), "malformed", "no text"),
        (answer(None, finish="SAFETY"), "refused", "SAFETY"),
        (
            {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {}},
            "refused",
            "prompt blocked",
        ),
    ],
    ids=["no-candidates", "no-parts", "limit-spent-thinking", "only-thoughts", "safety", "blocked"],
)
async def test_an_unusable_answer_is_an_error(
    fake_gemini: FakeGemini, body: dict[str, Any], kind: str, message: str
) -> None:
    fake_gemini.script.then(Fault(body=body))
    model = llm(fake_gemini)
    with pytest.raises(LLMError, match=message) as err:
        await model.complete(ASK)
    await model.aclose()
    assert err.value.kind == kind
    assert err.value.retryable is (kind == "malformed")


async def test_a_failed_answer_still_reports_the_tokens_it_cost(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.then(Fault(body=answer(None, finish="SAFETY")))
    model = llm(fake_gemini)
    with pytest.raises(LLMError) as err:
        await model.complete(ASK)
    await model.aclose()
    assert err.value.usage.total == 55


async def test_a_non_json_answer_is_malformed(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.then(Fault(raw=b"<html>502</html>"))
    model = llm(fake_gemini)
    with pytest.raises(LLMError) as err:
        await model.complete(ASK)
    await model.aclose()
    assert err.value.kind == "malformed"


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limited"), (503, "server")])
async def test_quota_and_server_errors_are_retryable_and_the_sdk_does_not_retry(
    fake_gemini: FakeGemini, status: int, kind: str
) -> None:
    fake_gemini.script.then(Fault.error(status, "busy"))
    model = llm(fake_gemini)
    with pytest.raises(LLMError, match="busy") as err:
        await model.complete(ASK)
    await model.aclose()
    assert (err.value.kind, err.value.retryable) == (kind, True)
    assert len(fake_gemini.script.requests) == 1


async def test_a_wrong_key_never_appears_in_the_error_or_the_logs(
    fake_gemini: FakeGemini, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "AIzaSy-live-chat-0123456789"
    caplog.set_level(logging.DEBUG)
    model = llm(fake_gemini, api_key=secret)
    with pytest.raises(LLMError) as err:
        await model.complete(ASK)
    await model.aclose()
    assert err.value.retryable is False
    assert secret not in str(err.value)
    assert secret not in caplog.text


async def test_a_hung_server_is_a_timeout(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.then(Fault(hang=True))
    model = llm(fake_gemini, timeout_s=0.3)
    with pytest.raises(LLMError) as err:
        await model.complete(ASK)
    await model.aclose()
    assert err.value.kind == "timeout"


def test_a_missing_key_is_a_config_error() -> None:
    with pytest.raises(LLMConfigError, match="ENGRAM_LLM__PRIMARY__API_KEY"):
        GeminiLLM(api_key="")

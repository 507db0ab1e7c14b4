"""The OpenAI-compatible LLM through the real openai SDK against a loopback fake chat API."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from engram_api.llm.base import ChatMessage, LLMError
from engram_api.llm.openai_compat import OpenAICompatLLM
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.scripted import Fault

PATH = "/v1/chat/completions"
ASK = [ChatMessage("system", "Answer in JSON."), ChatMessage("user", "Are these two the same?")]


def llm(api: FakeOpenAI, **kw: Any) -> OpenAICompatLLM:
    args: dict[str, Any] = {
        "api_key": api.api_key,
        "base_url": api.base_url,
        "model": "qwen2.5",
        "timeout_s": 5.0,
    }
    args.update(kw)
    return OpenAICompatLLM(**args)


def answer(content: object, finish: str = "stop", usage: object = None) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


async def test_a_chat_returns_the_text_and_the_tokens_it_cost(fake_openai: FakeOpenAI) -> None:
    model = llm(fake_openai)
    completion = await model.complete(ASK)
    await model.aclose()
    assert completion.text == "echo: Are these two the same?"
    assert completion.model_id == "openai/qwen2.5"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (8, 6)
    assert completion.truncated is False
    body = fake_openai.bodies(PATH)[0]
    assert body["messages"] == [
        {"role": "system", "content": "Answer in JSON."},
        {"role": "user", "content": "Are these two the same?"},
    ]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("qwen2.5", 0.0, 1024)
    assert "response_format" not in body


async def test_json_output_asks_for_a_json_object_and_limits_can_be_set_per_call(
    fake_openai: FakeOpenAI,
) -> None:
    model = llm(fake_openai, output_limit_param="max_completion_tokens")
    await model.complete(ASK, json_output=True, max_output_tokens=50, temperature=0.3)
    await model.aclose()
    body = fake_openai.bodies(PATH)[0]
    assert body["response_format"] == {"type": "json_object"}
    assert body["max_completion_tokens"] == 50
    assert "max_tokens" not in body
    assert body["temperature"] == 0.3


async def test_an_answer_cut_by_the_token_limit_is_marked_truncated(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script.then(Fault(body=answer('{"same": tr', finish="length")))
    model = llm(fake_openai)
    completion = await model.complete(ASK)
    await model.aclose()
    assert completion.truncated is True
    assert completion.text == '{"same": tr'


@pytest.mark.parametrize(
    ("body", "kind", "message"),
    [
        ({**answer("x"), "choices": []}, "malformed", "no choices"),
        (answer(None), "malformed", "no text"),
        (answer(""), "malformed", "no text"),
        (answer(None, finish="content_filter"), "refused", "content_filter"),
        ({"not": "a chat answer"}, "malformed", "openai-compatible chat"),
    ],
    ids=["no-choices", "null-content", "empty-content", "filtered", "wrong-shape"],
)
async def test_an_unusable_answer_is_an_error_that_still_reports_its_tokens(
    fake_openai: FakeOpenAI, body: dict[str, Any], kind: str, message: str
) -> None:
    fake_openai.script.then(Fault(body=body))
    model = llm(fake_openai)
    with pytest.raises(LLMError, match=message) as err:
        await model.complete(ASK)
    await model.aclose()
    assert err.value.kind == kind
    if "usage" in body:
        assert err.value.usage.total == 18


async def test_a_non_json_answer_is_malformed(fake_openai: FakeOpenAI) -> None:
    fake_openai.script.then(Fault(raw=b"Bad Gateway"))
    model = llm(fake_openai)
    with pytest.raises(LLMError) as err:
        await model.complete(ASK)
    await model.aclose()
    assert (err.value.kind, err.value.retryable) == ("malformed", True)


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limited"), (502, "server")])
async def test_overload_errors_are_retryable_and_the_sdk_does_not_retry(
    fake_openai: FakeOpenAI, status: int, kind: str
) -> None:
    fake_openai.script.then(Fault.error(status))
    model = llm(fake_openai)
    with pytest.raises(LLMError) as err:
        await model.complete(ASK)
    await model.aclose()
    assert (err.value.kind, err.value.retryable) == (kind, True)
    assert len(fake_openai.script.requests) == 1


async def test_a_wrong_key_never_appears_in_the_error_or_the_logs(
    fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-proj-live-abcdef0123456789"
    caplog.set_level(logging.DEBUG)
    model = llm(fake_openai, api_key=secret)
    with pytest.raises(LLMError) as err:
        await model.complete(ASK)
    await model.aclose()
    assert (err.value.kind, err.value.retryable) == ("auth", False)
    assert secret not in str(err.value)
    assert err.value.__cause__ is None
    assert secret not in caplog.text


async def test_a_hung_server_is_a_timeout(fake_openai: FakeOpenAI) -> None:
    fake_openai.script.then(Fault(hang=True))
    model = llm(fake_openai, timeout_s=0.3)
    with pytest.raises(LLMError) as err:
        await model.complete(ASK)
    await model.aclose()
    assert err.value.kind == "timeout"


async def test_a_chat_without_a_user_message_is_refused_before_any_request(
    fake_openai: FakeOpenAI,
) -> None:
    model = llm(fake_openai)
    with pytest.raises(LLMError, match="user message") as err:
        await model.complete([ChatMessage("system", "hi")])
    await model.aclose()
    assert err.value.retryable is False
    assert fake_openai.script.requests == []

"""Chat through any OpenAI-compatible API with the openai SDK (OpenAI, vLLM, Ollama, proxies)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from openai.types.chat import ChatCompletionMessageParam

from engram_api.llm.base import ChatMessage, Completion, LLMError, TokenUsage
from engram_api.remote import openai_sdk

DEFAULT_MODEL: Final = "gpt-4.1-mini"


def _wire(m: ChatMessage) -> ChatCompletionMessageParam:
    if m.role == "system":
        return {"role": "system", "content": m.content}
    if m.role == "assistant":
        return {"role": "assistant", "content": m.content}
    return {"role": "user", "content": m.content}


class OpenAICompatLLM:
    def __init__(
        self,
        *,
        api_key: str | None,
        model: str = "",
        base_url: str = "",
        timeout_s: float = 60.0,
        max_output_tokens: int = 1024,
        temperature: float = 0.0,
        output_limit_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    ) -> None:
        self._model = model or DEFAULT_MODEL
        self._key = api_key
        self._max_output = max_output_tokens
        self._temperature = temperature
        self._limit_param = output_limit_param
        self._client = openai_sdk.make_client(
            base_url=base_url, api_key=api_key, timeout_s=timeout_s
        )

    @property
    def model_id(self) -> str:
        return f"openai/{self._model}"

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        json_output: bool = False,
    ) -> Completion:
        if not any(m.role == "user" for m in messages):
            raise LLMError("a chat needs at least one user message", kind="invalid_request")
        extra: dict[str, Any] = {self._limit_param: max_output_tokens or self._max_output}
        if json_output:
            extra["response_format"] = {"type": "json_object"}
        try:
            response = await self._client.chat.completions.create(
                model=self._model,
                messages=[_wire(m) for m in messages],
                temperature=self._temperature if temperature is None else temperature,
                **extra,
            )
            usage = TokenUsage(
                input_tokens=response.usage.prompt_tokens if response.usage else 0,
                output_tokens=response.usage.completion_tokens if response.usage else 0,
            )
            choice = response.choices[0] if response.choices else None
        except Exception as exc:
            failure = openai_sdk.failure_from(exc, secret=self._key)
            raise LLMError(f"openai-compatible chat: {failure.detail}", kind=failure.kind) from None
        if choice is None:
            raise LLMError(
                "openai-compatible chat: answer has no choices", kind="malformed", usage=usage
            )
        if choice.finish_reason == "content_filter":
            raise LLMError(
                "openai-compatible chat: answer withheld (content_filter)",
                kind="refused",
                usage=usage,
            )
        text = choice.message.content if choice.message else None
        if not text:
            raise LLMError(
                "openai-compatible chat: answer has no text", kind="malformed", usage=usage
            )
        return Completion(text, usage, self.model_id, truncated=choice.finish_reason == "length")

    async def aclose(self) -> None:
        await self._client.close()

"""Gemini chat through google-genai (default model gemini-2.5-flash)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from google.genai import types as genai_types

from engram_api.llm.base import ChatMessage, Completion, LLMConfigError, LLMError, TokenUsage
from engram_api.remote import genai_sdk

DEFAULT_MODEL: Final = "gemini-2.5-flash"
_BLOCKED: Final = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE"}
)


def _name(value: object) -> str:
    """An SDK enum's wire name; unknown values may arrive as plain strings."""
    if value is None:
        return ""
    return str(getattr(value, "value", value))


class GeminiLLM:
    def __init__(
        self,
        *,
        api_key: str,
        model: str = "",
        base_url: str = "",
        timeout_s: float = 60.0,
        max_output_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> None:
        if not api_key:
            raise LLMConfigError(
                "the gemini LLM needs an API key (api_key; env ENGRAM_LLM__PRIMARY__API_KEY "
                "or ENGRAM_LLM__FALLBACK__API_KEY)"
            )
        self._model = (model or DEFAULT_MODEL).removeprefix("models/")
        self._key = api_key
        self._max_output = max_output_tokens
        self._temperature = temperature
        self._client = genai_sdk.make_client(
            base_url=base_url, api_key=api_key, timeout_s=timeout_s
        )

    @property
    def model_id(self) -> str:
        return f"gemini/{self._model}"

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        json_output: bool = False,
    ) -> Completion:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        contents = [
            genai_types.Content(
                role="model" if m.role == "assistant" else "user",
                parts=[genai_types.Part(text=m.content)],
            )
            for m in messages
            if m.role != "system"
        ]
        if not contents:
            raise LLMError("a chat needs at least one user message", kind="invalid_request")
        config = genai_types.GenerateContentConfig(
            system_instruction=system or None,
            max_output_tokens=max_output_tokens or self._max_output,
            temperature=self._temperature if temperature is None else temperature,
            response_mime_type="application/json" if json_output else None,
        )
        try:
            response = await self._client.aio.models.generate_content(
                model=self._model, contents=contents, config=config
            )
        except Exception as exc:
            failure = genai_sdk.failure_from(exc, secret=self._key)
            raise LLMError(f"gemini chat: {failure.detail}", kind=failure.kind) from None

        meta = response.usage_metadata
        usage = TokenUsage(
            input_tokens=(meta.prompt_token_count or 0) if meta else 0,
            output_tokens=((meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0))
            if meta
            else 0,
        )
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            raise LLMError(
                f"gemini chat: prompt blocked ({_name(feedback.block_reason)})",
                kind="refused",
                usage=usage,
            )
        if not response.candidates:
            raise LLMError("gemini chat: answer has no candidates", kind="malformed", usage=usage)
        candidate = response.candidates[0]
        reason = _name(candidate.finish_reason)
        if reason in _BLOCKED:
            raise LLMError(f"gemini chat: answer withheld ({reason})", kind="refused", usage=usage)
        parts = candidate.content.parts if candidate.content and candidate.content.parts else []
        # Thought parts are the model's reasoning, not its answer.
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if not text and reason == "MAX_TOKENS":
            # Typically a thinking model spending the whole limit on reasoning: retrying the
            # same request cannot help, a larger limit can.
            raise LLMError(
                f"gemini chat: the output limit was reached before any answer text "
                f"({usage.output_tokens} output tokens); raise max_output_tokens",
                kind="invalid_request",
                usage=usage,
            )
        if not text:
            raise LLMError(
                f"gemini chat: answer has no text ({reason or 'no reason'})",
                kind="malformed",
                usage=usage,
            )
        return Completion(text, usage, self.model_id, truncated=reason == "MAX_TOKENS")

    async def aclose(self) -> None:
        await self._client.aio.aclose()

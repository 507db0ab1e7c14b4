"""The LLM interface: a chat completion that returns text and the tokens it cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from engram_api.resilience import TRANSIENT_KINDS, FailureKind

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0
    # Everything the model generated, reasoning ("thinking") tokens included: they are billed.
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True)
class Completion:
    text: str
    usage: TokenUsage
    model_id: str
    # The answer was cut by the output token limit; a caller parsing JSON should expect garbage.
    truncated: bool = False


class LLMError(RuntimeError):
    """A provider failed, or answered with nothing usable.

    ``kind`` names the failure (see :data:`engram_api.resilience.FailureKind`); ``retryable``
    is true for outages and false when the request or configuration must change first.
    Messages never carry keys or prompt text.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: FailureKind = "server",
        retryable: bool | None = None,
        usage: TokenUsage | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = kind in TRANSIENT_KINDS if retryable is None else retryable
        # Tokens the failed call still cost (an answer that was withheld or unusable).
        self.usage = usage or TokenUsage()


class LLMConfigError(ValueError):
    """The LLM configuration cannot work (found at startup): the message says what to do."""


@runtime_checkable
class LLM(Protocol):
    @property
    def model_id(self) -> str:
        """e.g. ``gemini/gemini-2.5-flash``; recorded in maintenance reports."""
        ...

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        json_output: bool = False,
    ) -> Completion:
        """One chat turn. ``json_output`` asks the provider for a JSON object (callers still
        validate it). Raises :class:`LLMError`."""
        ...

    async def aclose(self) -> None: ...

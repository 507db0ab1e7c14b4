"""Asking the LLM for a JSON answer and validating it strictly.

The answer must be one JSON object matching the step's schema (unknown keys, unknown values,
wrong types are all rejected). A code fence around it is tolerated, nothing else: an answer
that does not validate raises :class:`InvalidAnswer` and the step changes nothing for that item.
Memory text goes to the model as quoted data, and the system prompt says so: a memory that
reads like an instruction is still only data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final, TypeVar

from pydantic import BaseModel, ValidationError

from engram_api.llm.base import ChatMessage
from engram_api.llm.budget import BudgetExhausted

from .context import RunContext

T = TypeVar("T", bound=BaseModel)
_FENCE: Final = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


class InvalidAnswer(ValueError):
    """The LLM's answer is not the JSON the step asked for; the message has no answer text."""


class NoLLM(RuntimeError):
    """There is no LLM for this run, or its budget is spent."""


def parse_answer(text: str, schema: type[T]) -> T:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        raw = json.loads(body)
    except ValueError:
        raise InvalidAnswer("the answer is not JSON") from None
    if not isinstance(raw, dict):
        raise InvalidAnswer("the answer is not a JSON object")
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['type']}" for e in exc.errors()
        )
        raise InvalidAnswer(f"the answer does not match the schema ({problems})") from None


def quote(text: str) -> str:
    """Memory text as a JSON string: newlines and quotes cannot break out of the data."""
    return json.dumps(text, ensure_ascii=False)


async def ask_json(
    ctx: RunContext,
    system: str,
    user: str,
    schema: type[T],
    *,
    max_output_tokens: int,
) -> T:
    """One call; raises NoLLM, LLMError, InvalidAnswer. A spent budget stops all LLM work."""
    if ctx.llm is None or ctx.budget_reason:
        raise NoLLM(ctx.llm_blocker() or "no LLM")
    messages: Sequence[ChatMessage] = (
        ChatMessage("system", system),
        ChatMessage("user", user),
    )
    try:
        completion = await ctx.llm.complete(
            messages, max_output_tokens=max_output_tokens, temperature=0.0, json_output=True
        )
    except BudgetExhausted as exc:
        ctx.budget_reason = str(exc)
        raise NoLLM(str(exc)) from None
    if completion.truncated:
        raise InvalidAnswer("the answer was cut off at the output token limit")
    return parse_answer(completion.text, schema)

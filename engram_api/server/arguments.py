"""Tool arguments the SDK's schema validation would reject, in our own words.

The SDK answers a wrong-type argument with pydantic's raw text (which the model reads as
noise) and no log line or metric; a lone surrogate passes validation and fails much later
with an unhandled ``UnicodeEncodeError`` when the answer is encoded. Both are caught before
the tool runs and described as ``field: rule``, never echoing the value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from pydantic import ValidationError

from engram_api.memory.model import BAD_TEXT_RULE, is_valid_text

_RULES: Final = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "missing": "is required",
    "missing_argument": "is required",
    "extra_forbidden": "is not a parameter of this tool",
    "none_required": "must be null",
}


def _bad_char(text: str) -> bool:
    return not is_valid_text(text)


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield path or "(argument name)", str(key)
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _strings(item, f"{path}.{n}")


def bad_text(arguments: dict[str, Any]) -> str | None:
    """The first argument holding text that is not valid Unicode, as ``field: rule``."""
    for path, text in _strings(arguments, ""):
        if _bad_char(text):
            # A bad argument *name* is reported without echoing it.
            field = path if not _bad_char(path) else "(argument name)"
            return f"{field}: {BAD_TEXT_RULE}"
    return None


def _type_name(err: Any) -> str:
    kind = str(err.get("type", ""))
    if kind in _RULES:
        return _RULES[kind]
    # Constrained and union types: pydantic's own sentence, which names the rule, not the
    # value (its "input" is never included here).
    msg = str(err.get("msg", "is not valid"))
    return msg[:1].lower() + msg[1:]


def describe(exc: ValidationError) -> str:
    """One ``field: rule`` per problem, joined by ``; `` (a union reports each field once)."""
    seen: dict[str, str] = {}
    for err in exc.errors(include_input=False, include_url=False):
        loc = [str(p) for p in err.get("loc", ())]
        # Union members add their type to the location (``limit.int``); the field is first.
        field = loc[0] if loc else "(arguments)"
        if field not in seen:
            seen[field] = _type_name(err)
    return "; ".join(f"{field}: {rule}" for field, rule in seen.items())

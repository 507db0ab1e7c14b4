"""The secret guard: credentials never become memories.

Patterns are matched case-insensitively against content and context. The error names the
field and the kind of credential, never the matched text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from engram_api.errors import SecretDetected

_VALUE: Final = r"""["']?[^\s"',;]{6,}"""

BUILTIN_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    ("Anthropic API key", r"\bsk-ant-[a-z0-9_-]{16,}"),
    ("OpenAI API key", r"\bsk-(?:proj-|svcacct-|admin-)?[a-z0-9_-]{20,}"),
    ("GitHub token", r"\bgh[pousr]_[a-z0-9]{30,}"),
    ("GitHub fine-grained token", r"\bgithub_pat_[a-z0-9_]{22,}"),
    ("AWS access key id", r"\b(?:akia|asia|abia|acca)[a-z0-9]{16}\b"),
    (
        "AWS secret access key",
        r"\baws_?secret(?:_?access)?_?key\b\s*[:=]\s*[\"']?[a-z0-9/+=]{40}",
    ),
    ("Google API key", r"\baiza[0-9a-z_-]{35}"),
    ("Slack token", r"\bxox[abprse]-[a-z0-9-]{10,}"),
    ("Slack webhook", r"hooks\.slack\.com/services/[a-z0-9]+/[a-z0-9]+/[a-z0-9]+"),
    ("JSON Web Token", r"\beyj[a-z0-9_-]{8,}\.eyj[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}"),
    ("private key", r"-----begin[a-z0-9 ]*private key(?: block)?-----"),
    ("bearer token", r"\bbearer\s+[a-z0-9._~+/-]{20,}=*"),
    (
        "credential assignment",
        r"\b(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|token|auth[_-]?token"
        r"|access[_-]?token|api[_-]?key|apikey|access[_-]?key|private[_-]?key)\b\s*[:=]\s*"
        + _VALUE,
    ),
    (
        "credential in prose",
        r"\b(?:my|our|the|his|her|their)\s+(?:[\w-]+\s+){0,2}(?:password|passcode|passphrase|pin"
        r"|api\s+key|secret\s+key|access\s+token|token)\s+(?:is|was|are)\s*:?\s*[\"']?\S{4,}",
    ),
    ("connection string with credentials", r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@[^\s/]+"),
)


class SecretPatternError(ValueError):
    """A configured extra pattern does not compile."""


@dataclass(frozen=True)
class _Pattern:
    name: str
    regex: re.Pattern[str]


class SecretGuard:
    def __init__(self, extra_patterns: list[str] | tuple[str, ...] = ()) -> None:
        compiled = [_Pattern(name, re.compile(rx, re.IGNORECASE)) for name, rx in BUILTIN_PATTERNS]
        for i, rx in enumerate(extra_patterns):
            try:
                compiled.append(_Pattern(f"configured pattern #{i + 1}", re.compile(rx, re.I)))
            except re.error as exc:
                raise SecretPatternError(
                    f"guards.extra_secret_patterns[{i}] is not a valid regular expression: {exc}"
                ) from None
        self._patterns = tuple(compiled)

    def find(self, text: str) -> str | None:
        """The kind of credential found in ``text``, or None."""
        for p in self._patterns:
            if p.regex.search(text):
                return p.name
        return None

    def check(self, **fields: str) -> None:
        """Raise :class:`SecretDetected` for the first field that holds a credential."""
        for field, text in fields.items():
            if text:
                found = self.find(text)
                if found:
                    raise SecretDetected(field, found)

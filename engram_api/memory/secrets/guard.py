"""The guard: every view of every field through the provider rules and the key shapes.

The error names the field and the kind of credential, never the matched text.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram_api.errors import SecretDetected

from . import normalise, shapes
from .detect import ProviderDetector, check_pattern


class SecretPatternError(ValueError):
    """A configured extra pattern is not accepted."""


class SecretGuard:
    def __init__(self, extra_patterns: Sequence[str] = ()) -> None:
        for i, rx in enumerate(extra_patterns):
            why = check_pattern(rx)
            if why is not None:
                raise SecretPatternError(
                    f"guards.extra_secret_patterns[{i}] is not a valid pattern "
                    f"(Rust regex syntax, no look-around or back-references): {why}"
                )
        self._providers = ProviderDetector(tuple(extra_patterns))

    def find(self, text: str) -> str | None:
        """The kind of credential found in ``text``, or None."""
        for view in normalise.views(text):
            kind = self._providers.find(view)
            if kind is not None:
                return kind
            hit = shapes.find(view)
            if hit is not None:
                return hit.kind
        return None

    def check(self, **fields: str) -> None:
        """Raise :class:`SecretDetected` for the first field that holds a credential.

        Callers check lengths first: the scan is linear, and the bound keeps it short.
        """
        for field, text in fields.items():
            if text:
                found = self.find(text)
                if found:
                    raise SecretDetected(field, found)

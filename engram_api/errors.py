"""Errors every layer raises and every surface (CLI, MCP, HTTP) turns into a clear message.

Each carries the field it is about and the rule that was broken, so the message a caller sees
says what to change. None of them ever carries a secret or a memory's content.
"""

from __future__ import annotations


class EngramError(Exception):
    """Base of the errors a caller can act on."""

    kind = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def to_dict(self) -> dict[str, str]:
        out = {"error": self.kind, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


class InvalidInput(EngramError):
    kind = "invalid_input"

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}", field=field)
        self.rule = rule


class PermissionDenied(EngramError):
    kind = "permission_denied"


class SecretDetected(EngramError):
    kind = "secret_rejected"

    def __init__(self, field: str, pattern_name: str) -> None:
        super().__init__(
            f"{field}: looks like it contains a credential ({pattern_name}); secrets are never "
            "stored — store a description of where the secret lives instead",
            field=field,
        )


class NotFound(EngramError):
    kind = "not_found"


class Unavailable(EngramError):
    """A dependency (store, embedder) is down and the operation cannot be queued."""

    kind = "unavailable"


class StoreLocked(EngramError):
    """The data dir is held by another process; ``holder`` is what that process recorded."""

    kind = "store_locked"

    def __init__(self, message: str, *, holder: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.holder = holder or {}


class Conflict(EngramError):
    kind = "conflict"

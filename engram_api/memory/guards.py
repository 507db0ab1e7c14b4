"""The secret guard (kept as the import path the rest of Engram uses); see :mod:`.secrets`."""

from .secrets import SecretGuard, SecretPatternError

__all__ = ["SecretGuard", "SecretPatternError"]

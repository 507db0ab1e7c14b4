"""The secret guard: credentials never become memories.

One job per module: :mod:`normalise` (the views of a text a scan looks at), :mod:`detect`
(provider formats on Kingfisher's kept rule set plus our own rule file), :mod:`shapes`
(key-assignment and prose shapes, English and Chinese, with value checks) and :mod:`guard`
(the order: length first, then every view through both).
"""

from .guard import SecretGuard, SecretPatternError

__all__ = ["SecretGuard", "SecretPatternError"]

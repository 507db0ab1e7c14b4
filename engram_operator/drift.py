"""Has a child drifted from what we want? (pure)

The API server adds defaults to everything we create (pull policies, DNS policy, termination
paths...), so "equal" would always be false. A child is in shape when every field we set still
has the value we set; a field we set to None must be absent.
"""

from __future__ import annotations

from typing import Any


def matches(desired: Any, actual: Any) -> bool:
    if desired is None:
        return actual is None
    if isinstance(desired, dict):
        if not isinstance(actual, dict):
            return False
        return all(matches(value, actual.get(key)) for key, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(desired) != len(actual):
            return False
        return all(matches(d, a) for d, a in zip(desired, actual, strict=True))
    return bool(desired == actual)

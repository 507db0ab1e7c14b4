"""Which Engram release a custom resource belongs to (pure).

Several releases may watch the same namespaces (prod and staging, two teams). Each EngramAgent
and EngramMaintenance belongs to exactly one of them, so no two operators ever act on one
resource:

- ``spec.release: <namespace>/<name>`` names the release;
- ``spec.release: <name>`` is the release of that name in the resource's own namespace;
- without ``spec.release`` the resource belongs to the release installed in its own namespace.

Every other operator leaves the resource alone: no finalizer, no status, no Secret, no fold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def release_of(body: Mapping[str, Any]) -> tuple[str, str | None]:
    """(namespace, release name or None for "the release of that namespace")."""
    meta = body.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    spec = body.get("spec") or {}
    declared = spec.get("release") if isinstance(spec, Mapping) else None
    if not isinstance(declared, str) or not declared:
        return namespace, None
    ns, sep, name = declared.partition("/")
    return (ns, name) if sep else (namespace, declared)


def belongs_to(body: Mapping[str, Any], *, release_namespace: str, release: str) -> bool:
    namespace, name = release_of(body)
    return namespace == release_namespace and name in (None, release)

"""Validate custom resources against our CRDs the way an API server would, approximately.

An API server defaults, then checks the structural schema, then evaluates the CEL rules
(``x-kubernetes-validations``). Here: schema defaults are applied, the ``openAPIV3Schema`` is
checked with jsonschema (Draft 4, the closest to OpenAPI 3.0), and each CEL rule is evaluated
with a real CEL interpreter on the node it is attached to. Kubernetes-only CEL functions are not
available, which is why our rules stick to standard CEL.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cel
import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "manifests" / "crds"
EXAMPLES_DIR = ROOT / "manifests" / "examples"
INVALID_DIR = EXAMPLES_DIR / "invalid"
EXPECT_ANNOTATION = "engram.dev/expect-error"


def load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def load_crds() -> dict[str, dict[str, Any]]:
    """CRDs by kind."""
    crds = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for doc in load_yaml_docs(path):
            crds[doc["spec"]["names"]["kind"]] = doc
    return crds


def schema_of(crd: dict[str, Any], version: str = "v1alpha1") -> dict[str, Any]:
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(version)


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting: fill absent properties that declare a default, recursively."""
    value = copy.deepcopy(value)
    if isinstance(value, dict):
        for key, prop in (schema.get("properties") or {}).items():
            if key not in value and "default" in prop:
                value[key] = copy.deepcopy(prop["default"])
            if key in value:
                value[key] = apply_defaults(prop, value[key])
    elif isinstance(value, list) and "items" in schema:
        value = [apply_defaults(schema["items"], item) for item in value]
    return value


def _cel_failures(schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue  # a transition rule: the API server runs it on updates only
        try:
            ok = cel.evaluate(rule["rule"], {"self": value})
        except Exception as exc:  # a rule that cannot run counts as a failure, with why
            yield f"{path or '(root)'}: rule {rule['rule']!r} failed to evaluate: {exc}"
            continue
        if ok is not True:
            yield f"{path or '(root)'}: {rule.get('message') or rule['rule']}"
    if isinstance(value, dict):
        for key, prop in (schema.get("properties") or {}).items():
            if key in value:
                yield from _cel_failures(prop, value[key], f"{path}.{key}" if path else key)
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            yield from _cel_failures(schema["items"], item, f"{path}[{index}]")


def validate(crd: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """Every problem an API server would report for ``obj``, one line each (empty = valid)."""
    schema = schema_of(crd)
    defaulted = apply_defaults(schema, obj)
    problems = [
        ".".join(str(p) for p in error.absolute_path) + ": " + error.message
        for error in jsonschema.Draft4Validator(schema).iter_errors(defaulted)
    ]
    if problems:
        return problems  # CEL rules only run on objects that pass the schema
    return list(_cel_failures(schema, defaulted, ""))


def walk_schema(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for key, prop in (schema.get("properties") or {}).items():
        yield from walk_schema(prop, f"{path}.{key}" if path else key)
    if "items" in schema:
        yield from walk_schema(schema["items"], f"{path}[]")

"""values.yaml is documented line by line and values.schema.json refuses what it should."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import helm_python
import jsonschema
import pytest
import yaml

from .rendering import CHART_DIR

VALUES_FILE = CHART_DIR / "values.yaml"
SCHEMA_FILE = CHART_DIR / "values.schema.json"

BAD_VALUES: list[tuple[str, dict[str, Any]]] = [
    ("unknown top-level key", {"replicaCount": 3}),
    ("unknown nested key", {"qdrant": {"persistence": {"sizeGi": 10}}}),
    ("unknown key deep in mcp", {"mcp": {"ingress": {"host": "a.example.com"}}}),
    ("replicas as a word", {"mcp": {"replicas": "two"}}),
    ("zero replicas", {"mcp": {"replicas": 0}}),
    ("auth flag as a string", {"auth": {"enabled": "yes"}}),
    ("port out of range", {"mcp": {"service": {"port": 70000}}}),
    ("size without a unit pattern", {"qdrant": {"persistence": {"size": "ten gigs"}}}),
    ("unknown embedding provider", {"embeddings": {"primary": {"provider": "word2vec"}}}),
    ("no primary embedding provider", {"embeddings": {"primary": {"provider": ""}}}),
    ("api key inline instead of a Secret", {"embeddings": {"primary": {"apiKey": "sk-123"}}}),
    ("llm api key inline", {"llm": {"apiKey": "sk-123"}}),
    ("floating qdrant tag", {"qdrant": {"image": {"tag": "latest"}}}),
    ("bad cron schedule", {"maintenance": {"defaultSchedules": {"daily": {"schedule": "daily"}}}}),
    ("schedule as a number", {"maintenance": {"defaultSchedules": {"weekly": {"schedule": 4}}}}),
    ("no backups kept", {"maintenance": {"defaultSchedules": {"backup": {"keep": 0}}}}),
    ("watch namespaces as a string", {"operator": {"watchNamespaces": "a,b"}}),
    ("bad log level", {"logLevel": "verbose"}),
    ("bad digest", {"image": {"digest": "latest"}}),
    ("extra env without a value", {"extraEnv": [{"name": "ENGRAM_X"}]}),
    ("unknown resources key", {"mcp": {"resources": {"requests": {"gpu": 1}}}}),
]


def _schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize(("why", "values"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_helm_refuses_bad_values(
    chart: helm_python.Chart, why: str, values: dict[str, Any]
) -> None:
    with pytest.raises(helm_python.HelmValuesError):
        chart.render(values, name="engram", namespace="engram")


@pytest.mark.parametrize(("why", "values"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_schema_refuses_bad_values_merged_over_the_defaults(
    chart: helm_python.Chart, why: str, values: dict[str, Any]
) -> None:
    merged = chart.merge_values(values)
    errors = list(jsonschema.Draft7Validator(_schema()).iter_errors(merged))
    assert errors, f"{why}: accepted"


def test_schema_accepts_the_defaults(chart: helm_python.Chart) -> None:
    jsonschema.Draft7Validator.check_schema(_schema())
    jsonschema.validate(chart.values, _schema(), cls=jsonschema.Draft7Validator)


def _object_schemas(node: Any, where: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if "properties" in node:
            yield where, node
        for key, child in node.items():
            yield from _object_schemas(child, f"{where}/{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _object_schemas(child, f"{where}/{index}")


def test_every_schema_object_with_properties_refuses_unknown_keys() -> None:
    for where, node in _object_schemas(_schema()):
        # allOf branches that only narrow a property of a closed $ref are fine.
        if "/allOf/" in where and "type" not in node:
            continue
        assert node.get("additionalProperties") is False, f"{where} allows unknown keys"


def _value_paths(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for key, child in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from _value_paths(child, path)


def _schema_has(schema: dict[str, Any], path: str) -> bool:
    node: dict[str, Any] = schema
    defs = schema["definitions"]
    for part in path.split("."):
        while "$ref" in node or "allOf" in node:
            node = defs[node["$ref"].split("/")[-1]] if "$ref" in node else node["allOf"][0]
        props = node.get("properties")
        if props is None:
            # A free-form map (labels, annotations) or a Kubernetes-syntax object.
            return node.get("additionalProperties", True) is not False
        if part not in props:
            return False
        node = props[part]
    return True


def test_every_default_value_is_described_by_the_schema(chart: helm_python.Chart) -> None:
    schema = _schema()
    undeclared = [p for p in _value_paths(chart.values) if not _schema_has(schema, p)]
    assert not undeclared


def test_every_value_has_a_comment_directly_above_it() -> None:
    text = VALUES_FILE.read_text(encoding="utf-8")
    lines = text.splitlines()
    root = yaml.compose(text)
    undocumented: list[str] = []

    def walk(node: yaml.Node) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                line = key.start_mark.line
                above = lines[line - 1].strip() if line > 0 else ""
                if not above.startswith("#"):
                    undocumented.append(f"line {line + 1}: {lines[line].strip()}")
                walk(value)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)

    assert root is not None
    walk(root)
    assert not undocumented, "\n".join(undocumented)

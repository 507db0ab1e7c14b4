"""Render charts/engram in-process with the real Helm SDK and look at the objects it produces."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART_DIR = REPO / "charts" / "engram"
CI_DIR = CHART_DIR / "ci"
RELEASE = "engram"
NAMESPACE = "engram"
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest checked.
KUBE_VERSIONS = ("1.29", "1.34")

Obj = dict[str, Any]


@dataclass(frozen=True)
class Rendered:
    """One rendered chart: its objects (NOTES.txt aside) and the notes text."""

    objects: tuple[Obj, ...]
    notes: str

    def of_kind(self, kind: str) -> list[Obj]:
        return [o for o in self.objects if o["kind"] == kind]

    def get(self, kind: str, name: str) -> Obj:
        found = [o for o in self.of_kind(kind) if o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
        return found[0]

    def find(self, kind: str, name: str) -> Obj | None:
        found = [o for o in self.of_kind(kind) if o["metadata"]["name"] == name]
        return found[0] if found else None

    def by_component(self, kind: str, component: str) -> Obj:
        found = [
            o
            for o in self.of_kind(kind)
            if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
        ]
        assert len(found) == 1, f"expected one {kind} of component {component}, got {len(found)}"
        return found[0]


def load_chart() -> helm_python.Chart:
    return helm_python.Chart.load(CHART_DIR)


def parse_manifests(manifests: Mapping[str, str]) -> Rendered:
    objects: list[Obj] = []
    notes = ""
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                objects.append(doc)
    return Rendered(objects=tuple(objects), notes=notes)


def render(
    chart: helm_python.Chart,
    values: dict[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> Rendered:
    return parse_manifests(chart.render(values or {}, name=release, namespace=namespace))


def ci_values() -> dict[str, dict[str, Any]]:
    """Every charts/engram/ci/*.yaml file by name, plus the defaults as "default"."""
    scenarios: dict[str, dict[str, Any]] = {"default": {}}
    for path in sorted(CI_DIR.glob("*.yaml")):
        scenarios[path.stem] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return scenarios


POD_TEMPLATE_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")


def pod_specs(rendered: Rendered) -> Iterator[tuple[str, Obj, Obj]]:
    """(description, pod metadata, pod spec) for every pod the chart would run."""
    for obj in rendered.objects:
        kind = obj["kind"]
        if kind not in POD_TEMPLATE_KINDS:
            continue
        where = f"{kind}/{obj['metadata']['name']}"
        if kind == "Pod":
            yield where, obj["metadata"], obj["spec"]
        elif kind == "CronJob":
            template = obj["spec"]["jobTemplate"]["spec"]["template"]
            yield where, template["metadata"], template["spec"]
        else:
            template = obj["spec"]["template"]
            yield where, template["metadata"], template["spec"]


def containers(pod_spec: Obj) -> list[Obj]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def env_value(container: Obj, name: str) -> str:
    found = [e for e in container.get("env", []) if e["name"] == name]
    assert len(found) == 1, f"container {container['name']} sets {name} {len(found)} times"
    assert "value" in found[0], f"{name} is not a plain value"
    value: str = found[0]["value"]
    return value


def labels_match(selector: Obj, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics for matchLabels and matchExpressions."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True

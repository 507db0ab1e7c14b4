"""The chart renders, lints and validates for the defaults and every ci/*.yaml scenario."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import pytest
import yaml

from .rendering import (
    CHART_DIR,
    KUBE_VERSIONS,
    Obj,
    Rendered,
    ci_values,
    pod_specs,
    render,
)

SCENARIOS = tuple(ci_values())
EXPECTED_CI_FILES = {
    "external-qdrant-values",
    "distributed-qdrant-values",
    "no-operator-values",
    "ingress-values",
    "auth-off-insecure-values",
}
# Custom resources kubernetes-validate has no schema for; each is checked another way below.
CUSTOM_KINDS = {
    ("engram.dev/v1alpha1", "EngramAgent"),
    ("engram.dev/v1alpha1", "EngramMaintenance"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}
STANDARD_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
)


def test_ci_directory_covers_every_required_scenario() -> None:
    assert set(SCENARIOS) >= EXPECTED_CI_FILES


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_every_rendered_builtin_object_passes_strict_kubernetes_validation(
    rendered_scenario: Callable[[str], Rendered], scenario: str, kube_version: str
) -> None:
    problems = []
    for obj in rendered_scenario(scenario).objects:
        if (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, kube_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            problems.append(f"{obj['kind']}/{obj['metadata']['name']} {path}: {exc.message}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_chart_lints_clean_in_strict_mode(
    scenario_values: dict[str, dict[str, Any]], scenario: str, kube_version: str
) -> None:
    report = helm_python.lint(
        CHART_DIR,
        scenario_values[scenario],
        strict=True,
        namespace="engram",
        kube_version=f"v{kube_version}.0",
    )
    serious = [m for m in report["messages"] if m["severity"] >= 2]
    assert not serious, serious
    assert not report["errors"], report["errors"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_only_known_custom_resources_are_rendered(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    for obj in rendered_scenario(scenario).objects:
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        if group.endswith(".k8s.io") or group in ("", "apps", "batch", "policy"):
            continue
        assert (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS, obj["kind"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendered_engram_resources_match_their_crd_schemas(
    chart: helm_python.Chart, rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    crds = [yaml.safe_load(c["data"]) for c in chart.crds]
    by_kind = {c["spec"]["names"]["kind"]: c for c in crds}
    resources = [
        o for o in rendered_scenario(scenario).objects if o["apiVersion"].startswith("engram.dev/")
    ]
    for resource in resources:
        kind = resource["kind"]
        assert kind in by_kind, f"charts/engram/crds/ has no {kind} CRD"
        crd = by_kind[kind]
        group, version = resource["apiVersion"].split("/")
        assert group == crd["spec"]["group"]
        served = {v["name"]: v for v in crd["spec"]["versions"] if v["served"]}
        assert version in served
        schema = served[version]["schema"]["openAPIV3Schema"]
        # jsonschema approximates the apiserver: no CEL, defaulting or int-or-string.
        errors = [
            f"{'.'.join(str(p) for p in e.path)}: {e.message}"
            for e in jsonschema.Draft4Validator(schema["properties"]["spec"]).iter_errors(
                resource["spec"]
            )
        ]
        assert not errors, f"{kind}/{resource['metadata']['name']}: {errors}"


def test_default_install_renders_the_schedules_and_the_test_agent(default_render: Rendered) -> None:
    assert len(default_render.of_kind("EngramMaintenance")) == 3
    assert [a["metadata"]["name"] for a in default_render.of_kind("EngramAgent")] == [
        "engram-helm-test"
    ]


def test_service_monitor_scrapes_the_mcp_service_metrics_port(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    rendered = rendered_scenario("ingress-values")
    monitor = rendered.get("ServiceMonitor", "engram")
    service = rendered.get("Service", "engram")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert ports["metrics"]["port"] == 9464
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"


def test_the_ingress_routes_only_the_mcp_port_never_the_metrics_port(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    rendered = rendered_scenario("ingress-values")
    service = rendered.get("Service", "engram")
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    ingress = rendered.get("Ingress", "engram")
    backends = {
        path["backend"]["service"]["port"]["number"]
        for rule in ingress["spec"]["rules"]
        for path in rule["http"]["paths"]
    }
    assert backends == {ports["http"]}
    assert ports["metrics"] not in backends


def test_the_service_listens_for_metrics_on_all_addresses_with_scope_kinds(
    default_render: Rendered,
) -> None:
    pod = default_render.get("StatefulSet", "engram")["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "engram")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ENGRAM_SERVER__METRICS_HOST"] == "0.0.0.0"
    assert env["ENGRAM_SERVER__METRICS_PORT"] == "9464"
    assert env["ENGRAM_SERVER__METRICS_SCOPE_LABELS"] == "kind"
    assert {"name": "metrics", "containerPort": 9464, "protocol": "TCP"} in container["ports"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_object_carries_the_standard_labels(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    for obj in rendered_scenario(scenario).objects:
        labels = obj["metadata"].get("labels", {})
        missing = [k for k in STANDARD_LABELS if k not in labels]
        assert not missing, f"{obj['kind']}/{obj['metadata']['name']} lacks {missing}"
        assert labels["app.kubernetes.io/instance"] == "engram"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
    for where, meta, _spec in pod_specs(rendered_scenario(scenario)):
        assert "app.kubernetes.io/component" in meta["labels"], where


def _names(obj: Obj) -> list[tuple[str, str]]:
    out = [(obj["kind"], obj["metadata"]["name"])]
    if obj["kind"] == "StatefulSet":
        sts = obj["metadata"]["name"]
        ordinal = f"{sts}-{obj['spec']['replicas'] - 1}"
        out.append(("Pod", ordinal))
        for claim in obj["spec"].get("volumeClaimTemplates", []):
            out.append(("PersistentVolumeClaim", f"{claim['metadata']['name']}-{ordinal}"))
    return out


def test_names_fit_kubernetes_limits_with_the_longest_release_name(
    chart: helm_python.Chart,
) -> None:
    # Helm allows release names of up to 53 characters.
    release = "a-very-long-release-name-for-an-engram-install-x-53ch"
    assert len(release) == 53
    helm_python.validate_release_name(release)
    values = yaml.safe_load((CHART_DIR / "ci" / "distributed-qdrant-values.yaml").read_text())
    rendered = render(chart, values, release=release)
    for obj in rendered.objects:
        for kind, name in _names(obj):
            assert len(name) <= 63, f"{kind}/{name} is {len(name)} characters"
            assert name == name.lower()
        if obj["kind"] == "EngramMaintenance":
            # The operator names its CronJob after it; CronJob names stop at 52.
            assert len(obj["metadata"]["name"]) <= 52, obj["metadata"]["name"]
        if obj["kind"] == "StatefulSet":
            # The controller-revision-hash label is "<name>-<10 chars>" and must fit in 63.
            assert len(obj["metadata"]["name"]) <= 52, obj["metadata"]["name"]
        for value in obj["metadata"].get("labels", {}).values():
            assert len(str(value)) <= 63


def test_notes_print_the_in_cluster_mcp_url_and_next_commands(default_render: Rendered) -> None:
    notes = default_render.notes
    assert "http://engram.engram.svc:8765/mcp" in notes
    assert "helm test engram -n engram" in notes
    assert "kubectl -n engram get engrammaintenance" in notes


def test_notes_warn_loudly_when_auth_is_off(rendered_scenario: Callable[[str], Rendered]) -> None:
    notes = rendered_scenario("auth-off-insecure-values").notes
    assert "authentication is OFF" in notes
    assert "LOST" in notes
    assert "authentication is OFF" not in rendered_scenario("default").notes

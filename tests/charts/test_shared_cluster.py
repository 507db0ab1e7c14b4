"""The chart on a shared cluster: its resources name their release, the uninstall hook cleans up
within its own narrow rights, secrets never travel through extraEnv, Qdrant's snapshot volume
fits its retention, and images can be pinned by digest."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from engram_operator import rbac
from engram_operator.settings import OperatorSettings

from .rendering import NAMESPACE, Rendered, env_value, render
from .test_operator_rbac import _bound_grants

DIGEST = "sha256:" + "0123456789abcdef" * 4


def _operator_env(rendered: Rendered, name: str) -> str:
    deployment = rendered.get("Deployment", "engram-operator")
    return env_value(deployment["spec"]["template"]["spec"]["containers"][0], name)


def test_the_charts_own_resources_name_their_release(default_render: Rendered) -> None:
    own = [*default_render.of_kind("EngramMaintenance"), *default_render.of_kind("EngramAgent")]
    assert {obj["metadata"]["name"] for obj in own} >= {"engram-daily", "engram-helm-test"}
    assert {obj["spec"]["release"] for obj in own} == {f"{NAMESPACE}/engram"}
    assert _operator_env(default_render, "ENGRAM_OPERATOR_RELEASE") == "engram"
    assert _operator_env(default_render, "ENGRAM_OPERATOR_WATCH_ALL") == "false"


def test_watch_all_is_asked_for_explicitly(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"operator": {"watchAllNamespaces": True}})
    assert _operator_env(rendered, "ENGRAM_OPERATOR_WATCH_ALL") == "true"


def _hook(rendered: Rendered) -> dict[str, Any]:
    return rendered.get("Job", "engram-uninstall")


@pytest.mark.parametrize(
    "values",
    [{}, {"operator": {"watchNamespaces": ["team-a"]}}, {"operator": {"watchAllNamespaces": True}}],
    ids=["default", "watched", "watch all"],
)
def test_the_uninstall_hook_runs_before_helm_deletes_the_operator_with_only_its_rights(
    chart: helm_python.Chart, values: dict[str, Any]
) -> None:
    rendered = render(chart, values)
    job = _hook(rendered)
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["engram-operator", "uninstall"]
    # Its ServiceAccount and Roles are hooks too, created before the Job and gone after it.
    for obj in rendered.objects:
        if obj["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "uninstall":
            continue
        annotations = obj["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-delete", obj["kind"]
        assert int(annotations["helm.sh/hook-weight"]) <= int(
            job["metadata"]["annotations"]["helm.sh/hook-weight"]
        )
        assert "hook-succeeded" in annotations["helm.sh/hook-delete-policy"]
    operator = values.get("operator", {})
    settings = OperatorSettings(
        configmap_namespace=NAMESPACE,
        image="engram:1",
        namespaces=operator.get("watchNamespaces", []),
        watch_all=operator.get("watchAllNamespaces", False),
    )
    granted = _bound_grants(rendered, ("engram-uninstall", NAMESPACE))
    assert granted == rbac.permissions(rbac.uninstall_grants(settings))
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ENGRAM_OPERATOR_RELEASE"] == "engram"
    assert env["ENGRAM_OPERATOR_NAMESPACES"] == ",".join(settings.namespaces)


def test_without_cleanup_on_uninstall_there_is_no_hook(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"operator": {"cleanupOnUninstall": False}})
    assert rendered.find("Job", "engram-uninstall") is None


@pytest.mark.parametrize(
    "name",
    [
        "ENGRAM_LLM__PRIMARY__API_KEY",
        "ENGRAM_EMBEDDINGS__FALLBACK__APIKEY",
        "OPENAI_API_KEY",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "ENGRAM_STORE__SECRET",
    ],
)
def test_extra_env_refuses_names_that_look_like_keys(chart: helm_python.Chart, name: str) -> None:
    with pytest.raises(helm_python.HelmRenderError) as caught:
        render(chart, {"extraEnv": [{"name": name, "value": "sk-live-123"}]})
    message = str(caught.value)
    assert f"extraEnv[{name}]" in message
    assert "llm.apiKeySecret" in message
    assert "qdrant.apiKey.existingSecret" in message
    assert "sk-live-123" not in message


def test_extra_env_accepts_plain_settings(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"extraEnv": [{"name": "ENGRAM_SEARCH__LIMIT_MAX", "value": "50"}]})
    env = rendered.get("ConfigMap", "engram-env")["data"]
    assert env["ENGRAM_SEARCH__LIMIT_MAX"] == "50"


def test_qdrant_keeps_no_snapshot_after_a_backup_by_default(default_render: Rendered) -> None:
    env = default_render.get("ConfigMap", "engram-env")["data"]
    assert env["ENGRAM_MAINTENANCE__BACKUP__SERVER_KEEP"] == "0"


@pytest.mark.parametrize(
    ("snapshots", "data", "fits"),
    [
        ({}, "10Gi", True),  # defaults: room for the one snapshot in flight
        ({"keepOnServer": 2}, "10Gi", False),
        ({"keepOnServer": 2, "size": "30Gi"}, "10Gi", True),
        ({"size": "10240Mi"}, "10Gi", True),
        ({}, "50Gi", False),
        ({"persistence": True, "size": "1Ti"}, "500Gi", True),
    ],
)
def test_the_snapshot_volume_must_fit_what_qdrant_keeps_during_a_backup(
    chart: helm_python.Chart, snapshots: dict[str, Any], data: str, fits: bool
) -> None:
    values = {"qdrant": {"snapshots": snapshots, "persistence": {"size": data}}}
    if fits:
        render(chart, values)
        return
    with pytest.raises(helm_python.HelmRenderError, match=r"qdrant\.snapshots\.size .* too small"):
        render(chart, values)


def test_images_can_be_pinned_by_digest_and_keep_their_tag(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"image": {"tag": "0.1.0", "digest": DIGEST}})
    deployment = rendered.get("Deployment", "engram-operator")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"ghcr.io/engram-dev/engram:0.1.0@{DIGEST}"
    # The maintenance Jobs and the uninstall hook run the very same image.
    assert _operator_env(rendered, "ENGRAM_OPERATOR_IMAGE") == image
    assert _hook(rendered)["spec"]["template"]["spec"]["containers"][0]["image"] == image

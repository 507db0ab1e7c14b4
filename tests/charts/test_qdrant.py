"""Qdrant: pinned image, storage, probes, an API key generated once, distributed mode."""

from __future__ import annotations

import base64
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import helm_python
import pytest

from .rendering import CHART_DIR, Obj, Rendered, env_value, render

PINNED_TAG = re.compile(r"^v\d+\.\d+\.\d+$")


def _qdrant(rendered: Rendered) -> Obj:
    return rendered.get("StatefulSet", "engram-qdrant")


def _container(rendered: Rendered) -> Obj:
    container: Obj = _qdrant(rendered)["spec"]["template"]["spec"]["containers"][0]
    return container


def test_qdrant_image_is_the_official_one_pinned_to_a_release(default_render: Rendered) -> None:
    image = _container(default_render)["image"]
    repository, tag = image.rsplit(":", 1)
    assert repository == "docker.io/qdrant/qdrant"
    assert PINNED_TAG.match(tag), tag
    assert tag.startswith("v1.15.")


def test_a_qdrant_digest_pins_the_image_and_keeps_the_tag_readable(
    chart: helm_python.Chart,
) -> None:
    digest = "sha256:" + "ab" * 32
    rendered = render(chart, {"qdrant": {"image": {"digest": digest}}})
    assert _container(rendered)["image"] == f"docker.io/qdrant/qdrant:v1.15.4@{digest}"


def test_qdrant_keeps_its_data_on_a_claim_per_pod(default_render: Rendered) -> None:
    qdrant = _qdrant(default_render)
    claims = {c["metadata"]["name"]: c["spec"] for c in qdrant["spec"]["volumeClaimTemplates"]}
    assert set(claims) == {"storage"}
    assert claims["storage"]["resources"]["requests"]["storage"] == "10Gi"
    mounts = {m["name"]: m["mountPath"] for m in _container(default_render)["volumeMounts"]}
    assert mounts["storage"] == "/qdrant/storage"
    assert (
        env_value(_container(default_render), "QDRANT__STORAGE__STORAGE_PATH") == "/qdrant/storage"
    )


def test_storage_class_and_size_come_from_values(chart: helm_python.Chart) -> None:
    rendered = render(
        chart,
        {
            "qdrant": {
                "persistence": {"size": "50Gi", "storageClass": "fast"},
                "snapshots": {"size": "50Gi"},
            }
        },
    )
    claim = _qdrant(rendered)["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["storageClassName"] == "fast"
    assert claim["resources"]["requests"]["storage"] == "50Gi"


def test_qdrant_probes_use_its_unauthenticated_health_endpoints(default_render: Rendered) -> None:
    container = _container(default_render)
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/livez", "port": "http"}


def test_qdrant_requires_the_api_key_from_the_release_secret(default_render: Rendered) -> None:
    container = _container(default_render)
    key_env = next(e for e in container["env"] if e["name"] == "QDRANT__SERVICE__API_KEY")
    ref = key_env["valueFrom"]["secretKeyRef"]
    secret = default_render.get("Secret", ref["name"])
    key = base64.b64decode(secret["data"][ref["key"]]).decode()
    assert ref["key"] == "ENGRAM_STORE__API_KEY"
    assert re.fullmatch(r"[A-Za-z0-9]{48}", key)


def test_an_existing_api_key_secret_replaces_the_generated_one(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"qdrant": {"apiKey": {"existingSecret": "my-qdrant-key"}}})
    assert rendered.find("Secret", "engram-qdrant") is None
    key_env = next(
        e for e in _container(rendered)["env"] if e["name"] == "QDRANT__SERVICE__API_KEY"
    )
    assert key_env["valueFrom"]["secretKeyRef"]["name"] == "my-qdrant-key"


@pytest.fixture
def key_probe_chart(tmp_path: Path) -> Path:
    """A chart that calls the real engram.qdrantApiKey helper with a stand-in lookup result."""
    chart = tmp_path / "keyprobe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: keyprobe\nversion: 0.1.0\n")
    shutil.copy(CHART_DIR / "templates" / "_helpers.tpl", chart / "templates" / "_helpers.tpl")
    (chart / "templates" / "probe.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n"
        '  key: {{ include "engram.qdrantApiKey" (dict "existing" .Values.existing) | quote }}\n'
    )
    return chart


def _probe_key(chart_dir: Path, existing: object) -> str:
    with helm_python.Chart.load(chart_dir) as chart:
        out = chart.render({"existing": existing}, name="engram", namespace="engram")
    text = next(iter(out.values()))
    match = re.search(r'key: "([^"]*)"', text)
    assert match, text
    return match.group(1)


def test_upgrade_keeps_the_api_key_already_stored_in_the_cluster(key_probe_chart: Path) -> None:
    stored = {"data": {"ENGRAM_STORE__API_KEY": base64.b64encode(b"kept-key-123").decode()}}
    assert _probe_key(key_probe_chart, stored) == "kept-key-123"
    assert _probe_key(key_probe_chart, stored) == "kept-key-123"


def test_first_install_generates_a_fresh_random_api_key(key_probe_chart: Path) -> None:
    # `lookup` returns an empty map on a first install (and offline).
    first, second = _probe_key(key_probe_chart, {}), _probe_key(key_probe_chart, {})
    assert re.fullmatch(r"[A-Za-z0-9]{48}", first)
    assert first != second


def test_the_secret_template_asks_the_cluster_for_the_stored_key() -> None:
    template = (CHART_DIR / "templates" / "qdrant" / "secret.yaml").read_text()
    assert re.search(r'lookup "v1" "Secret" \.Release\.Namespace \$name', template)
    assert 'include "engram.qdrantApiKey" (dict "existing" $existing)' in template


def test_standalone_qdrant_runs_the_image_entrypoint_without_cluster_mode(
    default_render: Rendered,
) -> None:
    container = _container(default_render)
    assert "command" not in container
    assert "args" not in container
    names = {e["name"] for e in container["env"]}
    assert "QDRANT__CLUSTER__ENABLED" not in names
    assert _qdrant(default_render)["spec"]["replicas"] == 1
    snapshots = next(
        v
        for v in _qdrant(default_render)["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "snapshots"
    )
    assert "emptyDir" in snapshots


def test_distributed_qdrant_bootstraps_peers_from_pod_zero(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    rendered = rendered_scenario("distributed-qdrant-values")
    qdrant = _qdrant(rendered)
    container = _container(rendered)
    assert qdrant["spec"]["replicas"] == 3
    assert env_value(container, "QDRANT__CLUSTER__ENABLED") == "true"
    assert env_value(container, "QDRANT__CLUSTER__P2P__PORT") == "6335"
    assert env_value(container, "QDRANT__STORAGE__COLLECTION__REPLICATION_FACTOR") == "2"
    assert env_value(container, "QDRANT__STORAGE__COLLECTION__WRITE_CONSISTENCY_FACTOR") == "1"
    assert env_value(container, "QDRANT__STORAGE__COLLECTION__SHARD_NUMBER_PER_NODE") == "2"
    script = container["args"][0]
    assert container["command"] == ["/bin/bash", "-c"]
    assert "engram-qdrant-0.engram-qdrant-headless.engram.svc:6335" in script
    assert '--uri "$self"' in script
    assert "--bootstrap" in script
    claims = {c["metadata"]["name"] for c in qdrant["spec"]["volumeClaimTemplates"]}
    assert claims == {"storage", "snapshots"}
    pdb = rendered.get("PodDisruptionBudget", "engram-qdrant")
    assert pdb["spec"]["maxUnavailable"] == 1


def test_qdrant_writes_only_to_volumes_and_sends_no_telemetry(default_render: Rendered) -> None:
    container = _container(default_render)
    assert env_value(container, "QDRANT__TELEMETRY_DISABLED") == "true"
    assert env_value(container, "QDRANT_INIT_FILE_PATH").startswith("/qdrant/init/")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/qdrant/storage", "/qdrant/snapshots", "/qdrant/init", "/tmp"} <= mounts
    spec = _qdrant(default_render)["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False

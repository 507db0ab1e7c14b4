"""`helm install` of charts/engram on a real API server, in namespaces enforcing PodSecurity
`restricted`: every object accepted (validation, defaulting, admission), every pod the
workloads would make admitted, upgrades keep the generated Qdrant key, `helm test` creates its
pod, and `helm uninstall` leaves nothing behind so the namespace deletes."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from .clis import Clis
from .conftest import delete_namespace, unique
from .controlplane import ControlPlane, wait_for
from .hooks import helm_uninstall
from .releases import (
    SERVICEMONITOR_CRD,
    WORKLOAD_KINDS,
    admit_pods,
    ci_values_files,
    ensure_crd,
    install,
    manifest_objects,
    stored,
)

HELM_TEST_TIMEOUT_S = 60.0


def _workloads(objects: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    return [o for o in objects if o["kind"] in (*WORKLOAD_KINDS, "CronJob")]


def _assert_installed_and_admitted(
    plane: ControlPlane, clis: Clis, release: str, namespace: str, warnings: str
) -> list[dict]:  # type: ignore[type-arg]
    objects = manifest_objects(clis, release, namespace)
    assert objects, "helm rendered nothing"
    missing = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o, got in stored(plane, objects, namespace)
        if got is None
    ]
    assert not missing, f"objects helm reported but the server does not have: {missing}"
    assert "PodSecurity" not in warnings, warnings
    refused = admit_pods(plane, namespace, _workloads(objects))
    assert not refused, f"pods the restricted namespace refuses: {refused}"
    return objects


def _assert_uninstalled(
    plane: ControlPlane,
    clis: Clis,
    release: str,
    namespace: str,
    objects: list[dict],  # type: ignore[type-arg]
    *,
    namespace_deletes: bool = False,
) -> None:
    # The pre-delete hook (engram-operator uninstall) is played in the kubelet's place.
    done = helm_uninstall(plane, clis, release, namespace, plane.work_dir / "hooks" / release)
    assert done.returncode == 0, done.helm_output + done.hook_output
    # Objects annotated `helm.sh/resource-policy: keep` (the backup claim) outlive the release
    # on purpose; deleting the namespace removes them.
    kept = {
        o["metadata"]["name"]
        for o in objects
        if (o["metadata"].get("annotations") or {}).get("helm.sh/resource-policy") == "keep"
    }
    left = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o, got in stored(plane, objects, namespace)
        if got is not None and o["metadata"]["name"] not in kept
    ]
    assert not left, f"left after helm uninstall: {left}"
    for plural in ("engramagents", "engrammaintenances"):
        items = plane.api().get(f"/apis/engram.dev/v1alpha1/namespaces/{namespace}/{plural}")
        assert items["items"] == [], f"{plural} left (stuck finalizer?): {items['items']}"
    if namespace_deletes:
        delete_namespace(plane, namespace, wait=True)


@pytest.mark.parametrize("values_file", ci_values_files(), ids=lambda p: p.stem)
def test_each_ci_values_file_installs_into_a_restricted_namespace_and_uninstalls_cleanly(
    control_plane: ControlPlane,
    clis: Clis,
    make_namespace,
    values_file: Path,  # type: ignore[no-untyped-def]
) -> None:
    namespace = make_namespace("chart")
    if "serviceMonitor" in values_file.read_text():
        ensure_crd(control_plane, SERVICEMONITOR_CRD)
    release = unique("e")
    warnings = install(clis, release, namespace, values_file=values_file)
    objects = _assert_installed_and_admitted(control_plane, clis, release, namespace, warnings)
    _assert_uninstalled(control_plane, clis, release, namespace, objects)


def test_the_default_install_upgrades_keeping_its_qdrant_key_runs_helm_test_and_uninstalls(
    control_plane: ControlPlane,
    clis: Clis,
    make_namespace,  # type: ignore[no-untyped-def]
) -> None:
    api = control_plane.api()
    namespace = make_namespace("chart")
    release = unique("e")
    fullname = f"{release}-engram"
    warnings = install(clis, release, namespace)
    objects = _assert_installed_and_admitted(control_plane, clis, release, namespace, warnings)

    secret_path = f"/api/v1/namespaces/{namespace}/secrets/{fullname}-qdrant"
    key = api.get(secret_path)["data"]["ENGRAM_STORE__API_KEY"]
    assert len(base64.b64decode(key)) >= 32
    install(clis, release, namespace, upgrade=True)
    assert api.get(secret_path)["data"]["ENGRAM_STORE__API_KEY"] == key

    # `helm test` creates its pod and waits for it to succeed. There is no kubelet: once the
    # server has admitted the pod, the harness reports it Succeeded in the kubelet's place.
    pod_path = f"/api/v1/namespaces/{namespace}/pods/{fullname}-test"
    helm_test = subprocess.Popen(
        [str(clis.bin_dir / "helm"), "test", release, "-n", namespace, "--timeout", "60s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=clis._env(None),
    )
    try:
        pod = wait_for(
            lambda: api.get_or_none(pod_path), timeout=HELM_TEST_TIMEOUT_S, what="the helm test pod"
        )
        assert pod["spec"]["serviceAccountName"] == f"{fullname}-test"
        assert pod["spec"]["automountServiceAccountToken"] is False
        projected = [v for v in pod["spec"]["volumes"] if "projected" in v]
        assert (
            projected[0]["projected"]["sources"][0]["serviceAccountToken"]["audience"] == "engram"
        )
        api.merge_patch(f"{pod_path}/status", {"status": {"phase": "Succeeded"}})
        output, _ = helm_test.communicate(timeout=HELM_TEST_TIMEOUT_S)
    finally:
        if helm_test.poll() is None:
            helm_test.kill()
            helm_test.wait()
    assert helm_test.returncode == 0, output
    assert "Phase:          Succeeded" in output or "Succeeded" in output, output
    # hook-delete-policy hook-succeeded: helm removed the pod itself.
    wait_for(
        lambda: api.get_or_none(pod_path) is None, timeout=30, what="helm to delete its test pod"
    )

    _assert_uninstalled(control_plane, clis, release, namespace, objects, namespace_deletes=True)

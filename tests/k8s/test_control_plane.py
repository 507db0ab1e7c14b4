"""The harness itself: a real API server with RBAC, PodSecurity and a garbage collector."""

from __future__ import annotations

import pytest

from .controlplane import ApiError, ControlPlane, wait_for


def test_the_api_server_reports_the_pinned_release(control_plane: ControlPlane) -> None:
    version = control_plane.api().get("/version")
    assert version["gitVersion"].startswith("v1.34.")


def test_an_unbound_service_account_is_denied_by_rbac(
    control_plane: ControlPlane, namespace: str
) -> None:
    nobody = control_plane.as_service_account(namespace, "nobody")
    try:
        with pytest.raises(ApiError) as denied:
            nobody.get(f"/api/v1/namespaces/{namespace}/secrets")
    finally:
        nobody.close()
    assert denied.value.status == 403


def test_podsecurity_restricted_rejects_a_privileged_pod(
    control_plane: ControlPlane, namespace: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged"},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "securityContext": {"privileged": True}}
            ]
        },
    }
    with pytest.raises(ApiError) as rejected:
        control_plane.api().post(f"/api/v1/namespaces/{namespace}/pods", pod, dryRun="All")
    assert 'violates PodSecurity "restricted:latest"' in rejected.value.message


def test_the_garbage_collector_deletes_what_an_owner_leaves(
    control_plane: ControlPlane, namespace: str
) -> None:
    api = control_plane.api()
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    owner = api.post(base, {"metadata": {"name": "owner"}})
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    api.post(base, {"metadata": {"name": "child", "ownerReferences": [ref]}})
    api.delete(f"{base}/owner")
    wait_for(lambda: api.get_or_none(f"{base}/child") is None, timeout=30, what="the GC")

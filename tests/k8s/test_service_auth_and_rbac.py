"""ServiceAccount tokens and RBAC on a real API server.

The MCP service runs as a local process with the chart StatefulSet's env, the chart
ServiceAccount's token (its one right: TokenReview) and the permission ConfigMap the operator
wrote (copied to a file, as the kubelet projects it). The chart's own `helm test` script then
checks it: a token of the test ServiceAccount, audience `engram`, bound by the chart's test
EngramAgent, lists the tools; tokens for another audience or of an unbound account are refused.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engram_operator import rbac

from .clis import CHART
from .controlplane import ControlPlane, Process, free_port, start_process, wait_for
from .kubelet import container_env
from .operator_process import LocalOperator
from .releases import Release

START_TIMEOUT_S = 120.0
BIND_TIMEOUT_S = 45.0


def _mcp_status(base: str, token: str) -> int:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    return httpx.post(f"{base}/mcp", json=body, headers=headers, timeout=15).status_code


def _sync_permissions(plane: ControlPlane, release: Release, path: Path) -> str:
    cm = plane.api().get(
        f"/api/v1/namespaces/{release.namespace}/configmaps/{release.fullname}-permissions"
    )
    text: str = cm["data"]["permissions.yaml"]
    path.write_text(text)
    return text


@pytest.fixture(scope="module")
def service(
    control_plane: ControlPlane,
    release: Release,
    operator: LocalOperator,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    work = tmp_path_factory.mktemp("mcp")
    api = control_plane.api()
    sts = api.get(f"/apis/apps/v1/namespaces/{release.namespace}/statefulsets/{release.fullname}")
    pod_spec = sts["spec"]["template"]["spec"]
    container = next(c for c in pod_spec["containers"] if c["name"] == "engram")
    env = container_env(api, release.namespace, container)
    # The chart's test agent binds the test ServiceAccount; wait until the operator folded it.
    permissions = work / "permissions.yaml"
    wait_for(
        lambda: (
            f"{release.fullname}-test" in _sync_permissions(control_plane, release, permissions)
        ),
        timeout=BIND_TIMEOUT_S,
        what="the operator to bind the test ServiceAccount",
    )
    kubeconfig = control_plane.service_account_kubeconfig(
        work / "mcp.kubeconfig", release.namespace, pod_spec["serviceAccountName"]
    )
    port = free_port()
    env.update(
        {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(work),
            "KUBECONFIG": str(kubeconfig),
            "ENGRAM_SERVER__HOST": "127.0.0.1",
            "ENGRAM_SERVER__PORT": str(port),
            "ENGRAM_PERMISSIONS_FILE": str(permissions),
            "ENGRAM_DATA_DIR": str(work / "data"),
            # A local store in place of the release's Qdrant (no kubelet runs it here).
            "ENGRAM_STORE__MODE": "embedded",
            "ENGRAM_STORE__URL": "",
        }
    )
    env.pop("ENGRAM_STORE__API_KEY", None)
    proc: Process = start_process(
        "engram-serve", [str(Path(sys.executable).with_name("engram")), "serve"], work, env
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        proc.check_alive()
        return httpx.get(f"{base}/readyz", timeout=5).status_code == 200

    try:
        wait_for(ready, timeout=START_TIMEOUT_S, what="engram serve /readyz", interval=0.5)
        yield base
    finally:
        proc.stop()


def test_the_helm_test_script_passes_with_a_bound_service_account_token(
    control_plane: ControlPlane, release: Release, service: str, tmp_path: Path
) -> None:
    token = control_plane.token_for(
        release.namespace, f"{release.fullname}-test", audiences=["engram"]
    )
    token_file = tmp_path / "token"
    token_file.write_text(token)
    done = subprocess.run(
        [sys.executable, str(CHART / "files" / "mcp-smoke.py")],
        env={
            **os.environ,
            "ENGRAM_TEST_URL": service,
            "ENGRAM_TEST_AUTH": "kubernetes",
            "ENGRAM_TEST_TOKEN_FILE": str(token_file),
            "ENGRAM_TEST_BIND_TIMEOUT_S": "30",
            "ENGRAM_TEST_POLL_S": "0.5",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok: tools/list names" in done.stdout


def test_a_token_for_another_audience_is_refused(
    control_plane: ControlPlane, release: Release, service: str
) -> None:
    # The API server's own audience: TokenReview with audience `engram` does not accept it.
    token = control_plane.token_for(release.namespace, f"{release.fullname}-test")
    assert _mcp_status(service, token) == 401


def test_a_token_of_an_unbound_service_account_is_refused(
    control_plane: ControlPlane, release: Release, service: str
) -> None:
    token = control_plane.token_for(
        release.namespace, f"{release.fullname}-maintenance", audiences=["engram"]
    )
    assert _mcp_status(service, token) == 403


def _allowed(
    plane: ControlPlane,
    user: str,
    namespace: str,
    group: str,
    resource: str,
    verb: str,
    name: str | None = None,
) -> bool:
    resource, _, sub = resource.partition("/")
    review = plane.api().post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "namespace": namespace,
                    "group": group,
                    "resource": resource,
                    "subresource": sub,
                    "verb": verb,
                    **({"name": name} if name else {}),
                },
            },
        },
    )
    return bool(review["status"].get("allowed"))


def test_the_chart_roles_allow_every_call_the_operator_and_the_service_make(
    control_plane: ControlPlane, release: Release, operator: LocalOperator
) -> None:
    ns = release.namespace
    op_user = f"system:serviceaccount:{ns}:{release.fullname}-operator"
    # What the chart grants for this release's settings, each right in its own scope.
    granted = rbac.grants(
        configmap_namespace=ns,
        configmap_name=f"{release.fullname}-permissions",
        job_namespace=ns,
        namespaces=[ns],
    )
    denied = [
        p
        for p in sorted(rbac.permissions(granted), key=str)
        if not _allowed(control_plane, op_user, p[0] or "", p[1], p[2], p[3], p[4])
    ]
    assert not denied, denied
    svc_user = f"system:serviceaccount:{ns}:{release.fullname}"
    assert _allowed(control_plane, svc_user, "", "authentication.k8s.io", "tokenreviews", "create")
    # And the operator, which has run with that token through the operator tests, was never
    # refused by the server.
    operator.alive()
    # (A 403 from NamespaceLifecycle, e.g. an event in a namespace being deleted, is not RBAC.)
    denials = re.findall(
        r'forbidden: User "system:serviceaccount:[^"]+" cannot [^\n]{0,200}',
        operator.process.log.read_text(),
    )
    assert not denials, denials


def test_calls_outside_the_chart_roles_are_denied(
    control_plane: ControlPlane, release: Release
) -> None:
    ns = release.namespace
    op = control_plane.as_service_account(ns, f"{release.fullname}-operator")
    svc = control_plane.as_service_account(ns, release.fullname)
    try:
        for client, path in (
            (op, f"/api/v1/namespaces/{ns}/secrets"),  # list: never granted
            (svc, f"/api/v1/namespaces/{ns}/configmaps"),
            (svc, f"/api/v1/namespaces/{ns}/secrets/{release.fullname}-qdrant"),
        ):
            with pytest.raises(Exception, match="HTTP 403"):
                client.get(path)
    finally:
        op.close()
        svc.close()


def test_the_operator_cannot_read_secrets_in_a_namespace_it_does_not_watch(
    control_plane: ControlPlane, release: Release
) -> None:
    op_user = f"system:serviceaccount:{release.namespace}:{release.fullname}-operator"
    assert not _allowed(control_plane, op_user, "kube-system", "", "secrets", "get")

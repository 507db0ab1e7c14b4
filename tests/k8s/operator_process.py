"""The operator as a local process, with the chart ServiceAccount's credentials.

It gets exactly what its pod would: the environment of the chart's Deployment (read back from
the server) and a token of the chart's `<fullname>-operator` ServiceAccount from the TokenRequest
API, so every call it makes is checked by RBAC against the chart's rules, never as an admin.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .controlplane import ControlPlane, Process, free_port, start_process, wait_for

OPERATOR_START_TIMEOUT_S = 60.0


def deployment_env(deployment: Mapping[str, Any], namespace: str) -> dict[str, str]:
    """The plain `value` env of the Deployment's container; fieldRefs resolved as the kubelet
    would (only metadata.namespace is used)."""
    env: dict[str, str] = {}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif (item.get("valueFrom") or {}).get("fieldRef", {}).get(
            "fieldPath"
        ) == "metadata.namespace":
            env[item["name"]] = namespace
    return env


@dataclass
class LocalOperator:
    process: Process
    health: str

    def stop(self) -> None:
        self.process.stop()

    def alive(self) -> None:
        self.process.check_alive()


def start_operator(
    plane: ControlPlane,
    *,
    namespace: str,
    fullname: str,
    work_dir: Path,
    extra_env: Mapping[str, str] | None = None,
) -> LocalOperator:
    api = plane.api()
    deployment = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{fullname}-operator")
    service_account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    work_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = plane.service_account_kubeconfig(
        work_dir / "operator.kubeconfig", namespace, service_account
    )
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work_dir),
        "KUBECONFIG": str(kubeconfig),
        **deployment_env(deployment, namespace),
        "ENGRAM_OPERATOR_HEALTH_HOST": "127.0.0.1",
        "ENGRAM_OPERATOR_HEALTH_PORT": str(port),
        "ENGRAM_OPERATOR_LOG_FORMAT": "plain",
        # The resync is a safety net for missed watch events; the tests watch the watch path.
        "ENGRAM_OPERATOR_RESYNC_SECONDS": "600",
        **(extra_env or {}),
    }
    executable = Path(sys.executable).with_name("engram-operator")
    process = start_process("engram-operator", [str(executable)], work_dir, env)
    health = f"http://127.0.0.1:{port}/healthz"

    def healthy() -> bool:
        process.check_alive()
        return httpx.get(health, timeout=2).status_code == 200

    try:
        wait_for(healthy, timeout=OPERATOR_START_TIMEOUT_S, what="the operator's /healthz")
    except BaseException:
        process.stop()
        raise
    return LocalOperator(process, health)

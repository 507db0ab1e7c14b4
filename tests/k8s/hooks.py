"""`helm uninstall` with the chart's pre-delete hook played in the kubelet's place.

There is no kubelet: the job controller creates the hook Job's pod and nothing runs it. Here
its container command runs as a local process, with the pod's environment and a token of the
pod's own ServiceAccount (so RBAC checks the hook's rights, not an admin's), and the pod is
then reported Succeeded or Failed, from which the job controller completes the Job and Helm
carries on.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .clis import Clis
from .controlplane import ControlPlane, wait_for

HOOK_POD_TIMEOUT_S = 60.0
HOOK_RUN_TIMEOUT_S = 120.0
HELM_TIMEOUT = "90s"


@dataclass(frozen=True)
class Uninstalled:
    returncode: int
    helm_output: str
    hook_output: str


def _pod_env(pod: Mapping[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in pod["spec"]["containers"][0].get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif ((item.get("valueFrom") or {}).get("fieldRef") or {}).get(
            "fieldPath"
        ) == "metadata.namespace":
            env[item["name"]] = pod["metadata"]["namespace"]
    return env


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_hook_pod(plane: ControlPlane, pod: Mapping[str, Any], work_dir: Path) -> str:
    """Run the hook pod's command locally as its ServiceAccount; report how it ended."""
    namespace = pod["metadata"]["namespace"]
    account = pod["spec"]["serviceAccountName"]
    kubeconfig = plane.service_account_kubeconfig(
        work_dir / f"{account}.kubeconfig", namespace, account
    )
    container = pod["spec"]["containers"][0]
    command = list(container["command"])
    assert command[0] == "engram-operator", command
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work_dir),
        "KUBECONFIG": str(kubeconfig),
        **_pod_env(pod),
        "ENGRAM_OPERATOR_LOG_FORMAT": "plain",
    }
    started = _now()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("engram-operator")), *command[1:]],
        env=env,
        cwd=work_dir,
        capture_output=True,
        text=True,
        timeout=HOOK_RUN_TIMEOUT_S,
        check=False,
    )
    output = done.stdout + done.stderr
    phase = "Succeeded" if done.returncode == 0 else "Failed"
    path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/status"
    plane.api().merge_patch(
        path,
        {
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": container["name"],
                        "image": container["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "terminated": {
                                "exitCode": done.returncode,
                                "reason": "Completed" if done.returncode == 0 else "Error",
                                "startedAt": started,
                                "finishedAt": _now(),
                            }
                        },
                    }
                ],
            }
        },
    )
    return output


def helm_uninstall(
    plane: ControlPlane, clis: Clis, release: str, namespace: str, work_dir: Path
) -> Uninstalled:
    """`helm uninstall --wait`, playing the pre-delete hook's pod when Helm creates it."""
    work_dir.mkdir(parents=True, exist_ok=True)
    helm = subprocess.Popen(
        [
            str(clis.bin_dir / "helm"),
            *("uninstall", release, "-n", namespace, "--wait", "--timeout", HELM_TIMEOUT),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=clis._env(None),
    )
    hook_output = ""
    try:
        # The hook pod carries the chart's labels: this release, component "uninstall".
        selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=uninstall"

        def hook_pod() -> Any:
            if helm.poll() is not None:
                return {"none": True}  # helm finished without a hook (no operator rendered)
            pods = plane.api().get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)
            return pods["items"][0] if pods["items"] else None

        pod = wait_for(hook_pod, timeout=HOOK_POD_TIMEOUT_S, what="the uninstall hook's pod")
        if "none" not in pod:
            hook_output = run_hook_pod(plane, pod, work_dir)
        output, _ = helm.communicate(timeout=HOOK_RUN_TIMEOUT_S)
    finally:
        if helm.poll() is None:
            helm.kill()
            helm.wait()
    return Uninstalled(helm.returncode, output, hook_output)

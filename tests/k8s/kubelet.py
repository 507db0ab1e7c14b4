"""The harness standing in for the kubelet (there is none): run a pod's container command as a
local process with the environment the kubelet would give it, then write the pod's terminated
state and termination message through the API, as the kubelet reports them."""

from __future__ import annotations

import base64
import datetime as dt
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .controlplane import Api

RUN_TIMEOUT_S = 180.0
# What the kubelet keeps of a termination message, and of the log tail it falls back to.
MESSAGE_MAX_BYTES = 4096
FALLBACK_LOG_LINES = 80


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_env(api: Api, namespace: str, container: Mapping[str, Any]) -> dict[str, str]:
    """envFrom first, then env (later entries win), as the kubelet builds it."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            cm = api.get(
                f"/api/v1/namespaces/{namespace}/configmaps/{source['configMapRef']['name']}"
            )
            env.update(cm.get("data") or {})
        elif "secretRef" in source:
            secret = api.get_or_none(
                f"/api/v1/namespaces/{namespace}/secrets/{source['secretRef']['name']}"
            )
            if secret is None and source["secretRef"].get("optional"):
                continue
            assert secret is not None, f"envFrom Secret {source['secretRef']['name']} is missing"
            env.update(
                {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
            )
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            secret = api.get(f"/api/v1/namespaces/{namespace}/secrets/{ref['name']}")
            env[item["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
    return env


@dataclass(frozen=True)
class Termination:
    exit_code: int
    message: str
    output: str


def run_container(
    api: Api,
    pod: Mapping[str, Any],
    *,
    work_dir: Path,
    overrides: Mapping[str, str] | None = None,
) -> Termination:
    """Run the pod's first container locally; paths under the pod's volume mounts are the
    caller's business (``overrides`` points the data dir at a local directory)."""
    namespace = pod["metadata"]["namespace"]
    container = pod["spec"]["containers"][0]
    env = container_env(api, namespace, container)
    work_dir.mkdir(parents=True, exist_ok=True)
    termination_file = work_dir / "termination-log"
    termination_file.write_text("")
    env.update(overrides or {})
    env.update(
        {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(work_dir),
            # The CLI writes its summary here instead of the pod's /dev/termination-log.
            "ENGRAM_TERMINATION_MESSAGE_PATH": str(termination_file),
        }
    )
    argv = [*container.get("command", []), *container.get("args", [])]
    done = subprocess.run(
        argv,
        env=env,
        cwd=work_dir,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    output = done.stdout + done.stderr
    message = termination_file.read_text()
    fallback = container.get("terminationMessagePolicy") == "FallbackToLogsOnError"
    if not message and fallback and done.returncode != 0:
        message = "\n".join(output.splitlines()[-FALLBACK_LOG_LINES:])
    message = message.encode()[-MESSAGE_MAX_BYTES:].decode(errors="ignore")
    return Termination(done.returncode, message, output)


def report_terminated(api: Api, pod: Mapping[str, Any], result: Termination, started: str) -> None:
    """Write what the kubelet would after the container exits."""
    container = pod["spec"]["containers"][0]
    ok = result.exit_code == 0
    status = {
        "phase": "Succeeded" if ok else "Failed",
        "startTime": started,
        "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}],
        "containerStatuses": [
            {
                "name": container["name"],
                "image": container["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": result.exit_code,
                        "reason": "Completed" if ok else "Error",
                        "message": result.message,
                        "startedAt": started,
                        "finishedAt": _now(),
                    }
                },
            }
        ],
    }
    meta = pod["metadata"]
    api.merge_patch(
        f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", {"status": status}
    )


def play_kubelet(
    api: Api, pod: Mapping[str, Any], *, work_dir: Path, overrides: Mapping[str, str] | None = None
) -> Termination:
    started = _now()
    result = run_container(api, pod, work_dir=work_dir, overrides=overrides)
    report_terminated(api, pod, result, started)
    return result

"""Thin helpers for the cluster e2e tests: kubectl, bounded polling, port-forward, the install.

Written to be read, not run here: there is no cluster in this repository's CI.
"""

from __future__ import annotations

import json
import re
import selectors
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import helm_python

CHART_DIR = Path(__file__).resolve().parents[2] / "charts" / "engram"
RELEASE_NAME = "engram"

T = TypeVar("T")


@dataclass(frozen=True)
class Cluster:
    context: str
    timeout_s: int

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", "--context", self.context, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=self.timeout_s,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def get(self, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json").stdout)
        return out

    def apply(self, manifest: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))

    def wait_for(
        self,
        what: str,
        probe: Callable[[], T | None],
        *,
        timeout_s: float | None = None,
        interval_s: float = 2.0,
    ) -> T:
        """Poll ``probe`` until it returns something other than None, within a bound."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.timeout_s)
        while True:
            value = probe()
            if value is not None:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(interval_s)

    @contextmanager
    def port_forward(self, namespace: str, target: str, port: int) -> Iterator[str]:
        """Forward a random loopback port to ``target``; yields its base URL."""
        process = subprocess.Popen(
            [
                "kubectl",
                "--context",
                self.context,
                "-n",
                namespace,
                "port-forward",
                target,
                f":{port}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            selector = selectors.DefaultSelector()
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + 30
            local_port = None
            while local_port is None:
                remaining = deadline - time.monotonic()
                assert remaining > 0, "kubectl port-forward did not report a port"
                if selector.select(timeout=remaining):
                    line = process.stdout.readline()
                    assert line, "kubectl port-forward exited"
                    match = re.search(r"127\.0\.0\.1:(\d+)", line)
                    if match:
                        local_port = int(match.group(1))
            yield f"http://127.0.0.1:{local_port}"
        finally:
            process.terminate()
            process.wait(timeout=10)


@dataclass
class Release:
    name: str
    namespace: str
    helm: helm_python.Config
    values: dict[str, Any] = field(default_factory=dict)


def release_values(image: str) -> dict[str, Any]:
    """Small volumes and one service replica: enough for a kind or k3d node."""
    repository, _, tag = image.rpartition(":")
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "mcp": {"replicas": 1},
        "qdrant": {
            "persistence": {"size": "1Gi"},
            "snapshots": {"persistence": False, "size": "1Gi"},
        },
        "maintenance": {"backups": {"persistence": True, "size": "1Gi"}},
    }


def install_release(
    helm: helm_python.Config, cluster: Cluster, namespace: str, image: str, timeout_s: int
) -> Release:
    values = release_values(image)
    with helm_python.Chart.load(CHART_DIR) as chart:
        helm.install(
            chart,
            RELEASE_NAME,
            values,
            namespace=namespace,
            create_namespace=True,
            wait="watcher",
            timeout=timeout_s,
        )
    cluster.kubectl("-n", namespace, "rollout", "status", f"statefulset/{RELEASE_NAME}")
    return Release(name=RELEASE_NAME, namespace=namespace, helm=helm, values=values)


def condition_true(obj: dict[str, Any], kind: str = "Ready") -> bool:
    conditions = obj.get("status", {}).get("conditions", [])
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)

"""Installing charts/engram with the real helm binary, and looking at what the server kept."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .clis import CHART, Clis
from .controlplane import ApiError, ControlPlane, wait_for

CI_DIR = CHART / "ci"
# The ServiceMonitor kind, for the values files that enable it (the Prometheus Operator would
# install the real CRD; the chart only needs the kind to exist).
SERVICEMONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
            "plural": "servicemonitors",
            "singular": "servicemonitor",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}

Obj = dict[str, Any]
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")


def ci_values_files() -> list[Path]:
    return sorted(CI_DIR.glob("*.yaml"))


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    fullname: str


def install(
    clis: Clis,
    name: str,
    namespace: str,
    *,
    values_file: Path | None = None,
    set_values: Mapping[str, str] | None = None,
    upgrade: bool = False,
) -> str:
    """`helm install` (or `helm upgrade`); returns helm's stderr (the server's warnings)."""
    args = ["upgrade" if upgrade else "install", name, str(CHART), "-n", namespace]
    if values_file is not None:
        args += ["-f", str(values_file)]
    for key, value in (set_values or {}).items():
        args += ["--set", f"{key}={value}"]
    return clis.helm(*args).stderr


def manifest_objects(clis: Clis, name: str, namespace: str) -> list[Obj]:
    text = clis.helm("get", "manifest", name, "-n", namespace).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def object_path(plane: ControlPlane, obj: Mapping[str, Any], namespace: str) -> str:
    """The REST path of a manifest object, from discovery (whether it is namespaced, plural)."""
    api_version: str = obj["apiVersion"]
    kind: str = obj["kind"]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    for resource in plane.api().get(base)["resources"]:
        if resource["kind"] == kind and "/" not in resource["name"]:
            ns = obj["metadata"].get("namespace", namespace)
            scope = f"/namespaces/{ns}" if resource["namespaced"] else ""
            return f"{base}{scope}/{resource['name']}/{obj['metadata']['name']}"
    raise AssertionError(f"the server does not serve {api_version} {kind}")


def stored(plane: ControlPlane, objects: list[Obj], namespace: str) -> Iterator[tuple[Obj, Any]]:
    for obj in objects:
        yield obj, plane.api().get_or_none(object_path(plane, obj, namespace))


def pod_of(workload: Mapping[str, Any]) -> Obj:
    """A Pod made from a workload's template, as its controller would make it."""
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    template = copy.deepcopy(spec["template"])
    pod_spec = template["spec"]
    # A StatefulSet's controller adds a volume per claim template.
    for claim in spec.get("volumeClaimTemplates") or []:
        pod_spec.setdefault("volumes", []).append(
            {
                "name": claim["metadata"]["name"],
                "persistentVolumeClaim": {"claimName": claim["metadata"]["name"] + "-0"},
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{workload['metadata']['name']}-dry-run",
            "labels": (template.get("metadata") or {}).get("labels") or {},
        },
        "spec": pod_spec,
    }


def admit_pods(plane: ControlPlane, namespace: str, workloads: list[Obj]) -> dict[str, str]:
    """Server-side dry-run of each workload's pod; the refusal message per workload, if any."""
    refused: dict[str, str] = {}
    for workload in workloads:
        try:
            plane.api().post(f"/api/v1/namespaces/{namespace}/pods", pod_of(workload), dryRun="All")
        except ApiError as exc:
            refused[f"{workload['kind']}/{workload['metadata']['name']}"] = exc.message
    return refused


def ensure_crd(plane: ControlPlane, crd: Obj) -> None:
    """Create a CRD if missing and wait until its group version serves it."""
    try:
        plane.api().post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    except ApiError as exc:
        if exc.status != 409:
            raise
    spec = crd["spec"]
    path = f"/apis/{spec['group']}/{spec['versions'][0]['name']}"

    def served() -> bool:
        found = plane.api().get_or_none(path) or {"resources": []}
        return any(r["name"] == spec["names"]["plural"] for r in found["resources"])

    wait_for(served, timeout=30, what=f"{path} to serve {spec['names']['plural']}")

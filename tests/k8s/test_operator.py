"""The operator, as a local process with the chart ServiceAccount's token, on a real API server:
EngramAgents become the permission ConfigMap and token Secrets, EngramMaintenances become
CronJobs; spec changes and deletions reach the children; what the server refuses shows.

One release (and its namespace) serves the session: the operator watches the release namespace,
where maintenance must live. Each test uses its own resource names in it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from engram_contract.permissions import hash_token, load_permission_config

from .clis import Clis
from .conftest import unique
from .controlplane import ControlPlane, wait_for
from .operator_process import LocalOperator
from .releases import Release

RECONCILE_TIMEOUT_S = 45.0
GROUP_PATH = "/apis/engram.dev/v1alpha1"


def _path(release: Release, plural: str, name: str = "") -> str:
    base = f"{GROUP_PATH}/namespaces/{release.namespace}/{plural}"
    return f"{base}/{name}" if name else base


def _apply(clis: Clis, release: Release, doc: dict[str, Any]) -> None:
    clis.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=json.dumps(doc))


def _agent(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramAgent",
        "metadata": {"name": name},
        "spec": {
            "read": ["global"],
            "write": ["global"],
            "operations": ["add", "search"],
            "maxTrust": "medium",
            "identity": {"token": {"enabled": True}},
            **spec,
        },
    }


def _maintenance(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramMaintenance",
        "metadata": {"name": name},
        "spec": {"task": "daily", "schedule": "0 3 * * *", "timeZone": "Etc/UTC", **spec},
    }


def _ready(obj: dict[str, Any] | None, generation: int | None = None) -> dict[str, Any] | None:
    """The Ready condition once it reflects ``generation`` (default: the current one)."""
    if obj is None:
        return None
    status = obj.get("status") or {}
    want = generation or obj["metadata"]["generation"]
    if status.get("observedGeneration") != want:
        return None
    for cond in status.get("conditions") or []:
        if cond["type"] == "Ready" and cond.get("observedGeneration", want) == want:
            return dict(cond)
    return None


def _permissions(plane: ControlPlane, release: Release) -> Any:
    cm = plane.api().get_or_none(
        f"/api/v1/namespaces/{release.namespace}/configmaps/{release.fullname}-permissions"
    )
    if cm is None:
        return None
    return load_permission_config((cm.get("data") or {}).get("permissions.yaml", ""))


def _wait(check: Any, what: str) -> Any:
    return wait_for(check, timeout=RECONCILE_TIMEOUT_S, what=what, interval=0.2)


def test_an_agent_becomes_a_permission_entry_and_a_token_secret_and_changes_reach_both(
    control_plane: ControlPlane, clis: Clis, release: Release, operator: LocalOperator
) -> None:
    api = control_plane.api()
    name = unique("agent")
    _apply(clis, release, _agent(name))
    obj_path = _path(release, "engramagents", name)
    ready = _wait(lambda: _ready(api.get(obj_path)), f"EngramAgent {name} Ready")
    assert ready["status"] == "True", ready

    secret = api.get(f"/api/v1/namespaces/{release.namespace}/secrets/{name}-engram-token")
    token = base64.b64decode(secret["data"]["token"]).decode()
    owner = secret["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("EngramAgent", name)
    policy = _wait(
        lambda: (
            (_permissions(control_plane, release) or None)
            and _permissions(control_plane, release).agents.get(name)
        ),
        "the agent in the permission ConfigMap",
    )
    assert hash_token(token) in policy.token_sha256
    assert policy.max_trust.value == "medium"
    # The token itself is nowhere in the ConfigMap.
    cm = api.get(
        f"/api/v1/namespaces/{release.namespace}/configmaps/{release.fullname}-permissions"
    )
    assert token not in json.dumps(cm)

    # A spec change: a new generation, reflected in the ConfigMap and in observedGeneration.
    api.merge_patch(obj_path, {"spec": {"maxTrust": "low"}})
    _wait(lambda: _ready(api.get(obj_path), 2), "observedGeneration 2")
    _wait(
        lambda: _permissions(control_plane, release).agents[name].max_trust.value == "low",
        "maxTrust low in the ConfigMap",
    )

    # Deleting it: the finalizer runs, the Secret and the entry go.
    api.delete(obj_path)
    _wait(lambda: api.get_or_none(obj_path) is None, "the EngramAgent to be gone")
    _wait(
        lambda: (
            api.get_or_none(f"/api/v1/namespaces/{release.namespace}/secrets/{name}-engram-token")
            is None
        ),
        "the token Secret to be gone",
    )
    _wait(lambda: name not in _permissions(control_plane, release).agents, "the entry removed")


def test_a_maintenance_becomes_an_owned_cronjob_that_follows_its_spec_and_is_collected(
    control_plane: ControlPlane, clis: Clis, release: Release, operator: LocalOperator
) -> None:
    api = control_plane.api()
    name = unique("maint")
    _apply(clis, release, _maintenance(name))
    obj_path = _path(release, "engrammaintenances", name)
    ready = _wait(lambda: _ready(api.get(obj_path)), f"EngramMaintenance {name} Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Scheduled"), ready
    cron_path = f"/apis/batch/v1/namespaces/{release.namespace}/cronjobs/{name}"
    cron = api.get(cron_path)
    assert cron["spec"]["schedule"] == "0 3 * * *"
    assert cron["spec"]["timeZone"] == "Etc/UTC"
    owner = cron["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("EngramMaintenance", name, True)

    api.merge_patch(obj_path, {"spec": {"schedule": "30 5 * * *", "suspend": True}})
    _wait(lambda: _ready(api.get(obj_path), 2), "observedGeneration 2")
    cron = api.get(cron_path)
    assert (cron["spec"]["schedule"], cron["spec"]["suspend"]) == ("30 5 * * *", True)
    assert _ready(api.get(obj_path), 2)["reason"] == "Suspended"  # type: ignore[index]

    api.delete(obj_path)
    _wait(lambda: api.get_or_none(obj_path) is None, "the EngramMaintenance to be gone")
    _wait(lambda: api.get_or_none(cron_path) is None, "the garbage collector to delete the CronJob")


def test_a_cronjob_the_server_rejects_shows_as_a_not_ready_condition(
    control_plane: ControlPlane, clis: Clis, release: Release, operator: LocalOperator
) -> None:
    api = control_plane.api()
    name = unique("badtz")
    # Passes the CRD's pattern; the CronJob validation refuses the unknown zone.
    _apply(clis, release, _maintenance(name, timeZone="Europe/Pari"))
    obj_path = _path(release, "engrammaintenances", name)
    # Shorter than other waits: a good CronJob is reconciled in about a second.
    ready = wait_for(lambda: _ready(api.get(obj_path)), timeout=15, what="a Ready condition")
    assert ready["status"] == "False"
    assert "timeZone" in ready["message"]


def test_kubectl_get_engramagents_prints_the_printer_columns(
    control_plane: ControlPlane, clis: Clis, release: Release, operator: LocalOperator
) -> None:
    api = control_plane.api()
    name = unique("cols")
    _apply(clis, release, _agent(name, write=["group:backend", "global"]))
    _wait(lambda: _ready(api.get(_path(release, "engramagents", name))), "Ready")
    table = clis.kubectl("get", "engramagents", name, "-n", release.namespace, "-o", "wide").stdout
    print(table)
    header, row = table.splitlines()
    assert header.split() == [
        "NAME",
        "AGENT",
        "RELEASE",
        "WRITES",
        "READY",
        "REASON",
        "TOKEN",
        "SECRET",
        "AGE",
    ]
    assert row.split()[:6] == [
        name,
        name,
        '["group:backend","global"]',
        "True",
        "Configured",
        f"{name}-engram-token",
    ]


@pytest.mark.parametrize(
    ("kind", "field", "expected"),
    [
        ("engramagent", "spec.maxTrust", "maxTrust"),
        ("engrammaintenance", "spec.timeZone", "IANA time zone"),
    ],
)
def test_kubectl_explain_describes_both_crds(
    clis: Clis, engram_crds: None, kind: str, field: str, expected: str
) -> None:
    out = clis.kubectl("explain", f"{kind}.{field}").stdout
    assert "GROUP:      engram.dev" in out, out
    assert expected in out, out
    top = clis.kubectl("explain", kind).stdout
    for part in ("DESCRIPTION:", "spec", "status"):
        assert part in top, top

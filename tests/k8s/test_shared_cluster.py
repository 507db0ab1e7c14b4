"""Two Engram releases side by side on a real control plane (kube-apiserver with RBAC).

Both operators run as local processes with their chart ServiceAccount's token, so every call
they make is checked by the chart's Roles. They share a watched namespace and never act on each
other's resources; an API-server refusal becomes a condition; the chart's rights hold only
where they should (checked by impersonation); and `helm uninstall` finishes, with the hook
deleting this release's resources while the operator still runs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from engram_contract.permissions import CONFIGMAP_KEY, load_permission_config

from .clis import Clis
from .conftest import RESTRICTED, create_namespace, delete_namespace, namespace_gone, unique
from .controlplane import ApiError, ControlPlane, wait_for
from .hooks import helm_uninstall
from .operator_process import LocalOperator, start_operator
from .releases import install

WAIT_S = 60.0
ENGRAM = "/apis/engram.dev/v1alpha1"


@dataclass
class Side:
    name: str
    namespace: str
    operator: LocalOperator

    @property
    def fullname(self) -> str:
        return f"{self.name}-engram"

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Pair:
    prod: Side
    staging: Side
    shared: str


@pytest.fixture(scope="module")
def pair(
    control_plane: ControlPlane,
    clis: Clis,
    engram_crds: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Pair]:
    shared = unique("shared")
    create_namespace(control_plane, shared, RESTRICTED)
    sides: list[Side] = []
    try:
        for role in ("prod", "staging"):
            namespace, name = unique(role), unique("e")
            create_namespace(control_plane, namespace, RESTRICTED)
            install(clis, name, namespace, set_values={"operator.watchNamespaces[0]": shared})
            operator = start_operator(
                control_plane,
                namespace=namespace,
                fullname=f"{name}-engram",
                work_dir=tmp_path_factory.mktemp(role),
            )
            sides.append(Side(name, namespace, operator))
        yield Pair(sides[0], sides[1], shared)
    finally:
        for side in sides:
            side.operator.stop()
            helm_uninstall(
                control_plane,
                clis,
                side.name,
                side.namespace,
                control_plane.work_dir / "hooks" / side.name,
            )
            delete_namespace(control_plane, side.namespace)
        delete_namespace(control_plane, shared)


def agent(name: str, release: str) -> dict[str, Any]:
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramAgent",
        "metadata": {"name": name},
        "spec": {"release": release, "read": ["global"], "identity": {"token": {"enabled": True}}},
    }


def ready(obj: dict[str, Any] | None) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == "Ready":
            return dict(cond)
    return {}


def config(plane: ControlPlane, side: Side) -> Any:
    cm = plane.api().get_or_none(
        f"/api/v1/namespaces/{side.namespace}/configmaps/{side.fullname}-permissions"
    )
    return None if cm is None else load_permission_config(cm["data"][CONFIGMAP_KEY])


def token_hash(plane: ControlPlane, namespace: str, agent_name: str) -> str:
    secret = plane.api().get(f"/api/v1/namespaces/{namespace}/secrets/{agent_name}-engram-token")
    return hashlib.sha256(base64.b64decode(secret["data"]["token"])).hexdigest()


def test_two_releases_sharing_a_namespace_each_serve_only_their_own(
    control_plane: ControlPlane, pair: Pair
) -> None:
    api = control_plane.api()
    prod, staging = pair.prod, pair.staging
    api.post(f"{ENGRAM}/namespaces/{pair.shared}/engramagents", agent("builder", prod.ref))
    api.post(f"{ENGRAM}/namespaces/{pair.shared}/engramagents", agent("tester", staging.ref))

    for side, mine in ((prod, "builder"), (staging, "tester")):
        obj = wait_for(
            lambda mine=mine: (
                o
                if ready(
                    o := api.get(f"{ENGRAM}/namespaces/{pair.shared}/engramagents/{mine}")
                ).get("status")
                == "True"
                else None
            ),
            timeout=WAIT_S,
            what=f"{mine} Ready",
        )
        # Only its own release's finalizer.
        assert obj["metadata"]["finalizers"] == [
            f"{side.name}.{side.namespace}.release.engram.dev/finalizer"
        ]
        folded = wait_for(
            lambda side=side, mine=mine: (
                c
                if (c := config(control_plane, side))
                and mine in c.agents
                and c.agents[mine].token_sha256
                else None
            ),
            timeout=WAIT_S,
            what=f"{mine} in {side.name}'s ConfigMap",
        )
        assert mine in folded.agents

    prod_config, staging_config = config(control_plane, prod), config(control_plane, staging)
    assert "tester" not in prod_config.agents
    assert "builder" not in staging_config.agents
    # The staging agent's token is nowhere in prod's ConfigMap: it cannot authenticate there.
    tester_hash = token_hash(control_plane, pair.shared, "tester")
    assert tester_hash in staging_config.agents["tester"].token_sha256
    assert tester_hash not in json.dumps(
        api.get(f"/api/v1/namespaces/{prod.namespace}/configmaps/{prod.fullname}-permissions")
    )

    # Each release scheduled its own default maintenance, in its own namespace.
    for side in (prod, staging):
        maint = wait_for(
            lambda side=side: (
                m
                if ready(
                    m := api.get(
                        f"{ENGRAM}/namespaces/{side.namespace}/engrammaintenances/"
                        f"{side.fullname}-daily"
                    )
                ).get("reason")
                == "Scheduled"
                else None
            ),
            timeout=WAIT_S,
            what=f"{side.name}'s daily maintenance Scheduled",
        )
        cronjob = api.get(
            f"/apis/batch/v1/namespaces/{side.namespace}/cronjobs/{side.fullname}-daily"
        )
        assert cronjob["metadata"]["ownerReferences"][0]["uid"] == maint["metadata"]["uid"]
        assert cronjob["spec"]["suspend"] is False
        labels = cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == side.name


def test_a_cronjob_the_api_server_rejects_is_ready_false_with_its_reason(
    control_plane: ControlPlane, pair: Pair
) -> None:
    api = control_plane.api()
    ns = pair.prod.namespace
    name = f"tz-{uuid.uuid4().hex[:5]}"
    # Europe/Pari passes the CRD's pattern; only the API server knows there is no such zone.
    api.post(
        f"{ENGRAM}/namespaces/{ns}/engrammaintenances",
        {
            "apiVersion": "engram.dev/v1alpha1",
            "kind": "EngramMaintenance",
            "metadata": {"name": name},
            "spec": {"task": "daily", "schedule": "0 3 * * *", "timeZone": "Europe/Pari"},
        },
    )
    path = f"{ENGRAM}/namespaces/{ns}/engrammaintenances/{name}"
    obj = wait_for(
        lambda: o if ready(o := api.get(path)).get("status") == "False" else None,
        timeout=WAIT_S,
        what="Ready=False",
    )
    condition = ready(obj)
    assert condition["reason"] == "Invalid", condition
    assert "Europe/Pari" in condition["message"]
    assert condition["observedGeneration"] == obj["metadata"]["generation"]
    assert api.get_or_none(f"/apis/batch/v1/namespaces/{ns}/cronjobs/{name}") is None

    api.merge_patch(path, {"spec": {"timeZone": "Etc/UTC"}})
    fixed = wait_for(
        lambda: o if ready(o := api.get(path)).get("status") == "True" else None,
        timeout=WAIT_S,
        what="Ready after the fix",
    )
    assert ready(fixed)["observedGeneration"] == fixed["metadata"]["generation"] == 2
    api.delete(path)


def _can(
    plane: ControlPlane, side: Side, verb: str, resource: str, namespace: str | None, name: str = ""
) -> bool:
    """A SubjectAccessReview for the operator's ServiceAccount (what impersonation checks)."""
    attributes: dict[str, Any] = {"verb": verb, "resource": resource, "group": ""}
    if "." in resource:
        resource, group = resource.split(".", 1)
        attributes.update(resource=resource, group=group)
    if "/" in attributes["resource"]:
        base, sub = attributes["resource"].split("/", 1)
        attributes.update(resource=base, subresource=sub)
    if namespace:
        attributes["namespace"] = namespace
    if name:
        attributes["name"] = name
    account = f"{side.fullname}-operator"
    review = plane.api().post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{side.namespace}:{account}",
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{side.namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": attributes,
            },
        },
    )
    return bool(review["status"].get("allowed"))


def test_the_operator_holds_its_rights_only_in_its_namespaces(
    control_plane: ControlPlane, pair: Pair
) -> None:
    prod = pair.prod
    ns, shared = prod.namespace, pair.shared
    permissions_cm = f"{prod.fullname}-permissions"
    # Where it should.
    assert _can(control_plane, prod, "patch", "configmaps", ns, permissions_cm)
    assert _can(control_plane, prod, "create", "cronjobs.batch", ns)
    assert _can(control_plane, prod, "create", "secrets", shared)
    assert _can(control_plane, prod, "watch", "engramagents.engram.dev", shared)
    # Nowhere else.
    assert not _can(control_plane, prod, "get", "secrets", "kube-system", "admin")
    assert not _can(control_plane, prod, "patch", "configmaps", "kube-system", "coredns")
    assert not _can(control_plane, prod, "patch", "configmaps", ns, "some-other-config")
    assert not _can(control_plane, prod, "create", "cronjobs.batch", shared)
    assert not _can(control_plane, prod, "create", "cronjobs.batch", "kube-system")
    assert not _can(control_plane, prod, "list", "secrets", shared)
    assert not _can(control_plane, prod, "watch", "engramagents.engram.dev", None)
    assert not _can(control_plane, prod, "get", "secrets", pair.staging.namespace, "x")
    # Its own calls are refused there too (as the ServiceAccount, not an admin).
    as_operator = control_plane.as_service_account(ns, f"{prod.fullname}-operator")
    try:
        with pytest.raises(ApiError) as refused:
            as_operator.get("/api/v1/namespaces/kube-system/secrets")
        assert refused.value.status == 403
        assert as_operator.get(f"/api/v1/namespaces/{ns}/configmaps/{permissions_cm}")
    finally:
        as_operator.close()


def test_uninstall_finishes_and_leaves_the_other_release_alone(
    control_plane: ControlPlane, clis: Clis, pair: Pair
) -> None:
    api = control_plane.api()
    prod = pair.prod
    helm_test_agent = f"{ENGRAM}/namespaces/{prod.namespace}/engramagents/{prod.fullname}-helm-test"
    # The chart's own agent carries the operator's finalizer: what used to strand uninstall.
    wait_for(
        lambda: (api.get_or_none(helm_test_agent) or {}).get("metadata", {}).get("finalizers"),
        timeout=WAIT_S,
        what="the helm-test agent's finalizer",
    )
    done = helm_uninstall(
        control_plane, clis, prod.name, prod.namespace, control_plane.work_dir / "hooks" / "u"
    )
    assert done.returncode == 0, done.helm_output + done.hook_output
    assert f"deleted engramagents/{pair.shared}/builder" in done.hook_output
    assert "removed its finalizer" not in done.hook_output  # the operator let go itself
    assert api.get_or_none(helm_test_agent) is None
    assert api.get_or_none(f"{ENGRAM}/namespaces/{pair.shared}/engramagents/builder") is None
    # Staging's agent, in the same namespace, is untouched and still Ready.
    tester = api.get(f"{ENGRAM}/namespaces/{pair.shared}/engramagents/tester")
    assert ready(tester)["status"] == "True"
    assert not tester["metadata"].get("deletionTimestamp")
    # Nothing holds the namespace: it deletes.
    delete_namespace(control_plane, prod.namespace)
    wait_for(
        lambda: namespace_gone(control_plane, prod.namespace),
        timeout=WAIT_S,
        what="the prod namespace to be deleted",
    )

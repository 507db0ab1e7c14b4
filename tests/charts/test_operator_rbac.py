"""The operator's RBAC in the rendered chart: exactly engram_operator.rbac's grants — verbs and
scope (which namespace, which names) — for the default values and the shared-cluster ones."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from engram_operator import rbac

from .rendering import NAMESPACE, RELEASE, Rendered, render

OPERATOR_SA = ("engram-operator", NAMESPACE)


def _bound_grants(rendered: Rendered, account: tuple[str, str]) -> set[rbac.Permission]:
    """What the rendered (Cluster)RoleBindings give this ServiceAccount, spelled out."""
    roles = {
        (obj["kind"], obj["metadata"].get("namespace", NAMESPACE), obj["metadata"]["name"]): obj
        for obj in rendered.objects
        if obj["kind"] in ("Role", "ClusterRole")
    }
    grants: list[rbac.Grant] = []
    for binding in rendered.objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = {(s["name"], s["namespace"]) for s in binding["subjects"]}
        if account not in subjects:
            continue
        cluster_wide = binding["kind"] == "ClusterRoleBinding"
        scope = None if cluster_wide else binding["metadata"].get("namespace", NAMESPACE)
        ref = binding["roleRef"]
        role_ns = NAMESPACE if ref["kind"] == "ClusterRole" else scope
        if ref["kind"] == "ClusterRole":
            role = roles[("ClusterRole", NAMESPACE, ref["name"])]
        else:
            role = roles[("Role", role_ns, ref["name"])]
        grants.append(rbac.Grant(scope, tuple(role["rules"])))
    return rbac.permissions(grants)


def _expected(values: dict[str, Any]) -> set[rbac.Permission]:
    operator = values.get("operator", {})
    return rbac.permissions(
        rbac.grants(
            configmap_namespace=NAMESPACE,
            configmap_name="engram-permissions",
            job_namespace=NAMESPACE,
            namespaces=operator.get("watchNamespaces", []),
            watch_all=operator.get("watchAllNamespaces", False),
        )
    )


SCENARIOS = {
    "default": {},
    "two watched namespaces": {"operator": {"watchNamespaces": ["team-a", "team-b"]}},
    "watch all": {"operator": {"watchNamespaces": ["team-a"], "watchAllNamespaces": True}},
}


@pytest.mark.parametrize("values", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_the_chart_grants_the_operator_exactly_the_rbac_py_grants_in_scope(
    chart: helm_python.Chart, values: dict[str, Any]
) -> None:
    granted = _bound_grants(render(chart, values), OPERATOR_SA)
    expected = _expected(values)
    assert sorted(granted - expected, key=str) == [], "the chart grants more than rbac.py"
    assert sorted(expected - granted, key=str) == [], "the chart grants less than rbac.py"


def test_by_default_the_operator_has_no_cluster_wide_right(default_render: Rendered) -> None:
    operator_objects = [
        obj
        for obj in default_render.objects
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding")
        and obj["metadata"]["labels"].get("app.kubernetes.io/component") == "operator"
    ]
    assert operator_objects == []
    granted = _bound_grants(default_render, OPERATOR_SA)
    assert {ns for ns, *_ in granted} == {NAMESPACE}
    # Not kube-system's Secrets, not any ConfigMap but its own.
    assert not rbac.allows(granted, ("kube-system", "", "secrets", "get", "admin-token"))
    assert not rbac.allows(granted, (NAMESPACE, "", "configmaps", "patch", "coredns"))
    assert rbac.allows(granted, (NAMESPACE, "", "configmaps", "patch", "engram-permissions"))


def test_watching_all_namespaces_adds_a_cluster_role_on_the_custom_resources_only(
    chart: helm_python.Chart,
) -> None:
    rendered = render(chart, SCENARIOS["watch all"])
    (role,) = [
        obj
        for obj in rendered.of_kind("ClusterRole")
        if obj["metadata"]["labels"].get("app.kubernetes.io/component") == "operator"
    ]
    # Cluster-scoped names carry the release namespace: two releases of one name never share.
    assert role["metadata"]["name"] == f"{NAMESPACE}:{RELEASE}-operator"
    cluster = {(g, r) for ns, g, r, _, _ in _bound_grants(rendered, OPERATOR_SA) if ns is None}
    assert {r for _, r in cluster} <= {
        "engramagents",
        "engrammaintenances",
        "engramagents/status",
        "engrammaintenances/status",
        "events",
    }
    assert "cluster-wide" in rendered.notes
    assert "Secrets" in rendered.notes


def test_a_watched_namespace_gets_a_role_in_that_namespace(chart: helm_python.Chart) -> None:
    rendered = render(chart, SCENARIOS["two watched namespaces"])
    roles = {
        (r["metadata"].get("namespace"), r["metadata"]["name"]) for r in rendered.of_kind("Role")
    }
    assert {("team-a", "engram-operator"), ("team-b", "engram-operator")} <= roles
    team_a = {
        (g, r, v) for ns, g, r, v, _ in _bound_grants(rendered, OPERATOR_SA) if ns == "team-a"
    }
    assert ("", "secrets", "create") in team_a
    assert not {r for _, r, _ in team_a} & {"cronjobs", "jobs", "pods", "configmaps"}


def test_two_releases_of_one_name_in_two_namespaces_share_no_cluster_scoped_object(
    chart: helm_python.Chart,
) -> None:
    values = {"operator": {"watchAllNamespaces": True}}
    names = []
    for ns in ("prod", "staging"):
        rendered = render(chart, values, namespace=ns)
        names.append(
            {
                (obj["kind"], obj["metadata"]["name"])
                for obj in rendered.objects
                if obj["kind"] in ("ClusterRole", "ClusterRoleBinding")
            }
        )
    assert names[0]
    assert not names[0] & names[1]


def test_no_grant_uses_wildcards_or_escalation(chart: helm_python.Chart) -> None:
    rendered = render(chart, SCENARIOS["watch all"])
    for obj in rendered.objects:
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in obj["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], rule
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
            assert not {"clusterroles", "roles", "rolebindings"} & set(rule["resources"]), rule

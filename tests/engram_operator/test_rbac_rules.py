"""The operator's RBAC grants (engram_operator/rbac.py) and the manifest generated from them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import yaml

from engram_operator import rbac

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "manifests" / "operator" / "rbac.yaml"


def _grants(*, watch_all: bool = False) -> list[rbac.Grant]:
    return rbac.grants(
        configmap_namespace="engram",
        configmap_name="engram-permissions",
        job_namespace="engram",
        namespaces=["team-a"],
        watch_all=watch_all,
    )


def test_the_rbac_manifest_is_generated_from_rbac_py() -> None:
    assert MANIFEST.read_text(encoding="utf-8") == rbac.render_manifests(), (
        "regenerate: python -m engram_operator.rbac > manifests/operator/rbac.yaml"
    )


def test_the_generator_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "engram_operator.rbac"], capture_output=True, text=True, check=True
    )
    assert result.stdout == rbac.render_manifests()


def test_the_plain_manifest_grants_a_role_in_its_namespace_and_nothing_cluster_wide() -> None:
    docs = list(yaml.safe_load_all(MANIFEST.read_text(encoding="utf-8")))
    assert not [doc for doc in docs if doc["kind"].startswith("Cluster")]
    (role,) = [doc for doc in docs if doc["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "engram"
    (grant,) = rbac.grants(
        configmap_namespace="engram",
        configmap_name="engram-permissions",
        job_namespace="engram",
        namespaces=[],
    )
    assert role["rules"] == list(grant.rules)
    (binding,) = [doc for doc in docs if doc["kind"] == "RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    (subject,) = binding["subjects"]
    accounts = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "ServiceAccount"}
    assert subject["name"] in accounts
    assert accounts["engram-maintenance"]["automountServiceAccountToken"] is False
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34", strict=True)


def test_no_grant_uses_wildcards_or_can_read_secrets_in_bulk() -> None:
    for watch_all in (False, True):
        for _, group, resource, verb, _ in rbac.permissions(_grants(watch_all=watch_all)):
            assert "*" not in (group, resource, verb)
            assert resource not in {"namespaces", "customresourcedefinitions"}
            assert not (resource == "secrets" and verb in {"list", "watch"})


def test_secrets_cronjobs_and_configmaps_are_never_granted_cluster_wide() -> None:
    cluster = {
        (group, resource, verb)
        for ns, group, resource, verb, _ in rbac.permissions(_grants(watch_all=True))
        if ns is None
    }
    # Watching every namespace needs the custom resources (and events about them), nothing else.
    assert {resource for _, resource, _ in cluster} == {
        "engramagents",
        "engrammaintenances",
        "engramagents/status",
        "engrammaintenances/status",
        "events",
    }
    assert not [p for p in rbac.permissions(_grants()) if p[0] is None]


def test_the_release_namespace_holds_the_job_rights_and_watched_ones_only_secrets() -> None:
    granted = rbac.permissions(_grants())
    team_a = {(g, r, v) for ns, g, r, v, _ in granted if ns == "team-a"}
    assert ("", "secrets", "create") in team_a
    assert not {r for _, r, _ in team_a} & {"cronjobs", "jobs", "pods", "configmaps"}
    release = {(g, r, v, name) for ns, g, r, v, name in granted if ns == "engram"}
    assert ("batch", "cronjobs", "create", None) in release
    # The ConfigMap by name; `create` cannot be limited by name in RBAC.
    assert ("", "configmaps", "patch", "engram-permissions") in release
    assert ("", "configmaps", "patch", None) not in release
    assert ("", "configmaps", "create", None) in release


def test_allows_checks_namespace_name_group_resource_and_verb() -> None:
    granted = rbac.permissions(_grants())
    assert rbac.allows(granted, ("engram", "", "configmaps", "patch", "engram-permissions"))
    assert not rbac.allows(granted, ("engram", "", "configmaps", "patch", "kube-proxy"))
    assert not rbac.allows(granted, ("kube-system", "", "secrets", "get", "admin"))
    assert rbac.allows(granted, ("team-a", "", "secrets", "get", "main-engram-token"))
    assert not rbac.allows(granted, ("team-a", "batch", "cronjobs", "create", None))
    assert not rbac.allows(granted, (None, "engram.dev", "engramagents", "watch", None))
    everywhere = rbac.permissions(_grants(watch_all=True))
    assert rbac.allows(everywhere, (None, "engram.dev", "engramagents", "watch", None))
    assert rbac.allows(everywhere, ("team-z", "engram.dev", "engramagents/status", "patch", "x"))
    assert not rbac.allows(everywhere, ("team-z", "", "secrets", "create", None))

"""The operator's RBAC rules (engram_operator/rbac.py) and the manifest generated from them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import yaml

from engram_operator import rbac

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "manifests" / "operator" / "rbac.yaml"


def test_the_rbac_manifest_is_generated_from_rbac_py() -> None:
    assert MANIFEST.read_text(encoding="utf-8") == rbac.render_manifests(), (
        "regenerate: python -m engram_operator.rbac > manifests/operator/rbac.yaml"
    )


def test_the_generator_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "engram_operator.rbac"], capture_output=True, text=True, check=True
    )
    assert result.stdout == rbac.render_manifests()


def test_the_cluster_role_holds_exactly_the_rules() -> None:
    docs = list(yaml.safe_load_all(MANIFEST.read_text(encoding="utf-8")))
    (role,) = [doc for doc in docs if doc["kind"] == "ClusterRole"]
    assert role["rules"] == rbac.RULES
    (binding,) = [doc for doc in docs if doc["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (subject,) = binding["subjects"]
    accounts = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "ServiceAccount"}
    assert subject["name"] in accounts
    assert accounts["engram-maintenance"]["automountServiceAccountToken"] is False
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34", strict=True)


def test_no_rule_uses_wildcards_or_can_read_secrets_in_bulk() -> None:
    for group, resource, verb in rbac.permissions():
        assert "*" not in (group, resource, verb)
    secret_verbs = {verb for _, resource, verb in rbac.permissions() if resource == "secrets"}
    assert not secret_verbs & {"list", "watch"}, "the operator only reads its own Secrets by name"
    assert not any(
        resource in {"namespaces", "customresourcedefinitions"}
        for _, resource, _ in rbac.permissions()
    )


def test_allows_checks_group_resource_and_verb() -> None:
    assert rbac.allows("", "configmaps", "patch")
    assert not rbac.allows("", "configmaps", "delete")
    assert not rbac.allows("apps", "configmaps", "patch")
    assert rbac.allows("engram.dev", "engramagents/status", "patch")

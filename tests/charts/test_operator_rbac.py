"""The operator's ClusterRole in the chart grants exactly engram_operator.rbac's rules."""

from __future__ import annotations

import importlib
from typing import Any

import yaml

from .rendering import CHART_DIR, Rendered

RULES_FILE = CHART_DIR / "files" / "operator-rules.yaml"


def _canonical(rules: list[dict[str, Any]]) -> list[tuple[tuple[str, ...], ...]]:
    """Order-insensitive form: each rule as sorted (apiGroups, resources, verbs) tuples."""
    out = []
    for rule in rules:
        extra = set(rule) - {"apiGroups", "resources", "verbs"}
        assert not extra, f"unexpected rule fields {extra}"
        out.append(
            (
                tuple(sorted(rule["apiGroups"])),
                tuple(sorted(rule["resources"])),
                tuple(sorted(rule["verbs"])),
            )
        )
    return sorted(out)


def _operator_rules() -> list[dict[str, Any]]:
    """The one module-level list of rule dicts in engram_operator.rbac, whatever its name."""
    rbac = importlib.import_module("engram_operator.rbac")
    keys = {"apiGroups", "resources", "verbs"}
    found = [
        list(value)
        for name, value in vars(rbac).items()
        if not name.startswith("_")
        and isinstance(value, list | tuple)
        and value
        and all(isinstance(rule, dict) and set(rule) == keys for rule in value)
    ]
    assert len(found) == 1, f"expected one rule list in engram_operator.rbac, found {len(found)}"
    return found[0]


def test_chart_cluster_role_equals_the_operator_rbac_rules(default_render: Rendered) -> None:
    expected = _operator_rules()
    rendered = default_render.get("ClusterRole", "engram-operator")["rules"]
    assert _canonical(rendered) == _canonical(expected), (
        "charts/engram/files/operator-rules.yaml must be:\n"
        + yaml.safe_dump(expected, default_flow_style=None, sort_keys=False)
    )


def test_operator_cluster_role_never_grants_wildcards_or_escalation(
    default_render: Rendered,
) -> None:
    rules = default_render.get("ClusterRole", "engram-operator")["rules"]
    assert rules == yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        assert not {"clusterroles", "roles"} & set(rule["resources"]), rule

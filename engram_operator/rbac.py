"""The Kubernetes API rights the operator needs: the single source of truth.

The operator tests record every API call the operator makes against kmock and check that each
is allowed by :data:`RULES` and that every (group, resource, verb) here was used. The chart's
ClusterRole must equal these rules; ``manifests/operator/rbac.yaml`` is generated from them:

    python -m engram_operator.rbac > manifests/operator/rbac.yaml
"""

from __future__ import annotations

from typing import Final, TypedDict

import yaml

from engram_operator.naming import GROUP, MANAGED_BY, base_labels


class Rule(TypedDict):
    apiGroups: list[str]
    resources: list[str]
    verbs: list[str]


RULES: Final[list[Rule]] = [
    # kopf: watches the resources and patches finalizers and its bookkeeping annotations.
    {"apiGroups": [GROUP], "resources": ["engramagents"], "verbs": ["list", "watch", "patch"]},
    # Recording a finished Job reads the owner's current status before appending to it.
    {
        "apiGroups": [GROUP],
        "resources": ["engrammaintenances"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {
        "apiGroups": [GROUP],
        "resources": ["engramagents/status", "engrammaintenances/status"],
        "verbs": ["patch"],
    },
    # The permission ConfigMap the MCP service mounts.
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]},
    # Agents' token Secrets: created, repaired when emptied, deleted with their agent.
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch", "delete"]},
    # A finished Job's pod holds the run's summary in its termination message.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    # kopf reports handler outcomes as events on the resources.
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get", "create", "patch"]},
    # Finished Jobs are noticed by watching them (and listed again on resync).
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "watch"]},
]

Permission = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def permissions(rules: list[Rule] = RULES) -> set[Permission]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def allows(group: str, resource: str, verb: str, rules: list[Rule] = RULES) -> bool:
    return (group, resource, verb) in permissions(rules)


def render_manifests(*, namespace: str = "engram", name: str = "engram-operator") -> str:
    """ServiceAccounts, ClusterRole and ClusterRoleBinding for a plain (chart-less) install."""
    labels = base_labels("operator") | {"app.kubernetes.io/managed-by": "engram-manifests"}
    docs = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
        },
        {
            # Maintenance pods run as this account and never receive its token.
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": "engram-maintenance",
                "namespace": namespace,
                "labels": base_labels("maintenance")
                | {"app.kubernetes.io/managed-by": "engram-manifests"},
            },
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": [dict(rule) for rule in RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]
    header = (
        "# Generated from engram_operator/rbac.py by `python -m engram_operator.rbac`; "
        "do not edit.\n"
        f"# The operator ({MANAGED_BY}) needs exactly these rights; see docs/operator.md.\n"
    )
    return header + yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


if __name__ == "__main__":
    print(render_manifests(), end="")

"""The Kubernetes API rights the operator needs, and where: the single source of truth.

Least privilege by default. Namespaced Roles only:

- in the release namespace, the permission ConfigMap (by name), the maintenance CronJobs, their
  Jobs and pods, and events;
- in every watched namespace (the release namespace included), the custom resources, agents'
  token Secrets and events;
- a ClusterRole only when asked to watch every namespace, and then on the custom resources
  (and events about them) alone: token Secrets are still made only where a Role allows it.

The operator tests record every API call the operator makes against kmock and check that each
is allowed by :func:`grants` — group, resource, verb, namespace and name — and that every grant
was used; the chart test checks that the rendered Roles equal these grants.
``manifests/operator/rbac.yaml`` is generated from them:

    python -m engram_operator.rbac > manifests/operator/rbac.yaml
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, NotRequired, TypedDict

import yaml

from engram_operator.naming import AGENTS, GROUP, MAINTENANCES, MANAGED_BY, base_labels
from engram_operator.settings import OperatorSettings


class Rule(TypedDict):
    apiGroups: list[str]
    resources: list[str]
    verbs: list[str]
    resourceNames: NotRequired[list[str]]


def _rule(group: str, resources: list[str], verbs: list[str]) -> Rule:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


# The custom resources: kopf lists and watches them, and patches finalizers and its bookkeeping
# annotations.
CUSTOM_RESOURCE_RULES: Final[list[Rule]] = [
    _rule(GROUP, [AGENTS, MAINTENANCES], ["list", "watch", "patch"]),
    _rule(GROUP, [f"{AGENTS}/status", f"{MAINTENANCES}/status"], ["patch"]),
]
# kopf reports handler outcomes as events on the resources.
EVENT_RULE: Final = _rule("", ["events"], ["create"])
# Every watched namespace: the resources, and agents' token Secrets (by name: no list/watch).
WATCHED_RULES: Final[list[Rule]] = [
    *CUSTOM_RESOURCE_RULES,
    _rule("", ["secrets"], ["get", "create", "patch", "delete"]),
    EVENT_RULE,
]
# Where maintenance runs (the release namespace): one CronJob per EngramMaintenance, finished
# Jobs noticed by a watch (and listed again on resync), a finished Job's pod for its summary.
# Recording a finished Job reads its EngramMaintenance's current status before appending.
JOB_RULES: Final[list[Rule]] = [
    _rule(GROUP, [MAINTENANCES], ["get"]),
    _rule("batch", ["cronjobs"], ["get", "create", "patch"]),
    _rule("batch", ["jobs"], ["list", "watch"]),
    _rule("", ["pods"], ["list"]),
    EVENT_RULE,
]
# Watching every namespace: the custom resources' list and watch need a ClusterRole. Nothing else
# is cluster-wide.
CLUSTER_RULES: Final[list[Rule]] = [*CUSTOM_RESOURCE_RULES, EVENT_RULE]


# The chart's pre-delete hook (uninstall.py), under its own ServiceAccount: this release's
# resources, listed, deleted, and let go of if the operator does not.
UNINSTALL_RULES: Final[list[Rule]] = [
    _rule(GROUP, [AGENTS, MAINTENANCES], ["list", "delete", "patch"])
]


def uninstall_grants(settings: OperatorSettings) -> list[Grant]:
    """Where the hook acts: every watched namespace, or the whole cluster when watching all."""
    if settings.watch_all:
        return [Grant(None, tuple(UNINSTALL_RULES))]
    return [Grant(ns, tuple(UNINSTALL_RULES)) for ns in settings.namespaces]


def configmap_rules(configmap_name: str) -> list[Rule]:
    """The permission ConfigMap: read and patched by name. `create` cannot be limited by name
    (the API server authorizes it before the object has one), so it is a rule of its own."""
    return [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [configmap_name],
            "verbs": ["get", "patch"],
        },
        _rule("", ["configmaps"], ["create"]),
    ]


@dataclass(frozen=True)
class Grant:
    """Rules that hold in one namespace, or cluster-wide when ``namespace`` is None."""

    namespace: str | None
    rules: tuple[Rule, ...]


def grants(
    *,
    configmap_namespace: str,
    configmap_name: str,
    job_namespace: str,
    namespaces: Iterable[str],
    watch_all: bool = False,
) -> list[Grant]:
    """Every right the operator needs, with its scope (the same inputs as its settings)."""
    by_namespace: dict[str, list[Rule]] = {}
    for ns in sorted({*namespaces, configmap_namespace, job_namespace}):
        by_namespace[ns] = list(WATCHED_RULES)
    by_namespace[configmap_namespace] += configmap_rules(configmap_name)
    by_namespace[job_namespace] += [rule for rule in JOB_RULES if rule != EVENT_RULE]
    out = [Grant(ns, tuple(rules)) for ns, rules in by_namespace.items()]
    if watch_all:
        out.append(Grant(None, tuple(CLUSTER_RULES)))
    return out


def grants_for(settings: OperatorSettings) -> list[Grant]:
    return grants(
        configmap_namespace=settings.configmap_namespace,
        configmap_name=settings.configmap_name,
        job_namespace=settings.job_namespace,
        namespaces=settings.namespaces,
        watch_all=settings.watch_all,
    )


# (namespace or None for cluster-wide, apiGroup, resource[/subresource], verb, name or None)
Permission = tuple[str | None, str, str, str, str | None]


def permissions(granted: Iterable[Grant]) -> set[Permission]:
    """Each grant spelled out; a None name means any name."""
    out: set[Permission] = set()
    for grant in granted:
        for rule in grant.rules:
            names: list[str | None] = [*rule.get("resourceNames", [])] or [None]
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in names:
                            out.add((grant.namespace, group, resource, verb, name))
    return out


def allows(granted: set[Permission], request: Permission) -> bool:
    """Would RBAC allow this request? Cluster-wide grants hold in every namespace; a request
    without a namespace (a cluster-wide list or watch) needs a cluster-wide grant."""
    namespace, group, resource, verb, name = request
    for scope in {namespace, None}:
        if (scope, group, resource, verb, None) in granted:
            return True
        if name is not None and (scope, group, resource, verb, name) in granted:
            return True
    return False


def render_manifests(*, namespace: str = "engram", name: str = "engram-operator") -> str:
    """ServiceAccounts, Role and RoleBinding for a plain (chart-less) install that watches its
    own namespace only (the settings' default)."""
    labels = base_labels("operator") | {"app.kubernetes.io/managed-by": "engram-manifests"}
    (grant,) = grants(
        configmap_namespace=namespace,
        configmap_name="engram-permissions",
        job_namespace=namespace,
        namespaces=[namespace],
    )
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
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "rules": [dict(rule) for rule in grant.rules],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]
    header = (
        "# Generated from engram_operator/rbac.py by `python -m engram_operator.rbac`; "
        "do not edit.\n"
        f"# The operator ({MANAGED_BY}) needs exactly these rights to watch namespace "
        f"{namespace}; see docs/operator.md\n"
        "# for more namespaces (a Role and RoleBinding of WATCHED_RULES in each).\n"
    )
    return header + yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


if __name__ == "__main__":
    print(render_manifests(), end="")

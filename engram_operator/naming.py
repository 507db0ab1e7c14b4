"""Names the operator and the cluster agree on: the API group, resources, labels, child names."""

from __future__ import annotations

from typing import Final

GROUP: Final = "engram.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
AGENTS: Final = "engramagents"
AGENT_KIND: Final = "EngramAgent"
MAINTENANCES: Final = "engrammaintenances"
MAINTENANCE_KIND: Final = "EngramMaintenance"

MANAGED_BY: Final = "engram-operator"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
# The Helm release a child belongs to (as on every object the chart renders).
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_AGENT: Final = f"{GROUP}/agent"
LABEL_MAINTENANCE: Final = f"{GROUP}/maintenance"
LABEL_TASK: Final = f"{GROUP}/task"

# kopf's own bookkeeping (finalizer, progress and diff-base annotations) lives under our group.
# The finalizer of releases before shared-cluster support; each release now has its own (kopf
# removes its finalizer from every resource no handler of its own matches, so one shared name
# let each release strip the other's).
LEGACY_FINALIZER: Final = f"{GROUP}/finalizer"
KOPF_PREFIX: Final = f"kopf.{GROUP}"


def finalizer(release: str, release_namespace: str) -> str:
    """This release's finalizer: `<release>.<namespace>.release.engram.dev/finalizer` (a DNS
    subdomain: release <= 53 and namespace <= 63 characters keep it valid)."""
    return f"{release}.{release_namespace}.release.{GROUP}/finalizer"


TOKEN_KEY: Final = "token"
TOKEN_SECRET_SUFFIX: Final = "-engram-token"
CONTAINER_NAME: Final = "engram"
READY: Final = "Ready"


def base_labels(component: str, release: str | None = None) -> dict[str, str]:
    labels = {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_PART_OF: "engram",
        LABEL_COMPONENT: component,
    }
    if release is not None:
        labels[LABEL_INSTANCE] = release
    return labels


def token_secret_name(agent_resource_name: str) -> str:
    """The Secret that holds an agent's token; the CRD caps resource names at 63 characters."""
    return agent_resource_name + TOKEN_SECRET_SUFFIX


def cronjob_name(maintenance_resource_name: str) -> str:
    """One CronJob per EngramMaintenance, same name (the CRD caps it at 52 characters, the
    CronJob limit that leaves room for the Job suffix)."""
    return maintenance_resource_name

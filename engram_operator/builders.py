"""Pure ``build_*`` functions: the manifests and status documents the operator writes.

No I/O here; the reconcilers decide when to create or patch what these return.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from engram_contract.jobs import (
    BACKUP_DIR,
    BACKUP_DIR_ENV,
    BACKUP_KEEP_ENV,
    DATA_DIR,
    ENTRYPOINT,
    job_args,
)
from engram_contract.permissions import CONFIGMAP_KEY
from engram_contract.report import Task
from engram_operator.conditions import ready_condition
from engram_operator.folding import Verdict
from engram_operator.models import MaintenanceSpec, Quantities, RunRecord
from engram_operator.naming import (
    CONTAINER_NAME,
    LABEL_AGENT,
    LABEL_MAINTENANCE,
    LABEL_TASK,
    TOKEN_KEY,
    base_labels,
    cronjob_name,
    token_secret_name,
)
from engram_operator.settings import OperatorSettings

# Maintenance runs are retried by the next schedule, not by the Job: a retry would only repeat
# the failure and hide its termination message behind a second pod.
JOB_BACKOFF_LIMIT: Final = 0
# The prototype's cron wrapper gave a run two hours; a run that needs longer is stuck.
JOB_DEADLINE_SECONDS: Final = 7200
# A missed schedule older than this is skipped rather than run late (also keeps the CronJob
# controller from giving up after 100 missed starts while the operator's cluster was down).
STARTING_DEADLINE_SECONDS: Final = 3600
# Finished Jobs kept by the CronJob controller; their results already live in our status.
JOBS_KEPT: Final = 3
DEFAULT_REQUESTS: Final = Quantities(cpu="100m", memory="256Mi")
DEFAULT_LIMITS: Final = Quantities(memory="2Gi")


@dataclass(frozen=True)
class Owner:
    """The custom resource a child belongs to."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Owner:
        meta = body["metadata"]
        return cls(
            api_version=str(body["apiVersion"]),
            kind=str(body["kind"]),
            name=str(meta["name"]),
            namespace=str(meta["namespace"]),
            uid=str(meta["uid"]),
        )

    def reference(self) -> dict[str, Any]:
        # controller=true is what "adopted" means: garbage collection removes the child with
        # its owner, and nothing else may claim it. No blockOwnerDeletion: it only matters to
        # foreground deletion of the owner, and where the OwnerReferencesPermissionEnforcement
        # admission plugin is on (OpenShift) it would need `update` on the owner's finalizers
        # subresource, or creating the child fails with 403.
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
        }

    def as_body(self) -> dict[str, Any]:
        """Just enough of the owner to attach an event to it."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid},
        }

    def owns(self, child: Mapping[str, Any]) -> bool:
        refs = (child.get("metadata") or {}).get("ownerReferences") or []
        return any(ref.get("uid") == self.uid and ref.get("controller") for ref in refs)


def build_permission_configmap(
    *, name: str, namespace: str, text: str, release: str | None = None
) -> dict[str, Any]:
    """The ConfigMap the MCP service mounts; ``text`` is ``dump_permission_config(...)``."""
    labels = base_labels("permissions", release)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {CONFIGMAP_KEY: text},
    }


def encode_token(token: str) -> str:
    return base64.b64encode(token.encode("utf-8")).decode("ascii")


def decode_token(secret: Mapping[str, Any]) -> str | None:
    """The token in a Secret, or None when the key is missing or not valid base64 UTF-8."""
    raw = (secret.get("data") or {}).get(TOKEN_KEY)
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def build_token_secret(*, owner: Owner, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": token_secret_name(owner.name),
            "namespace": owner.namespace,
            "labels": {**base_labels("agent-token"), LABEL_AGENT: owner.name},
            "ownerReferences": [owner.reference()],
        },
        "data": {TOKEN_KEY: encode_token(token)},
    }


def build_token_patch(token: str) -> dict[str, Any]:
    return {"data": {TOKEN_KEY: encode_token(token)}}


def _quantities(override: Quantities, default: Quantities) -> dict[str, str]:
    merged = default.model_dump(exclude_none=True) | override.model_dump(exclude_none=True)
    return dict(sorted(merged.items()))


def maintenance_labels(owner: Owner, task: Task, release: str) -> dict[str, str]:
    """On the CronJob, its Jobs and their pods: the Job watch and Qdrant's NetworkPolicy select
    on them, the release label included, so no other release's pods match."""
    return {
        **base_labels("maintenance", release),
        LABEL_MAINTENANCE: owner.name,
        LABEL_TASK: task.value,
    }


def build_cronjob(
    *, owner: Owner, spec: MaintenanceSpec, settings: OperatorSettings
) -> dict[str, Any]:
    """The CronJob that runs one maintenance task on its schedule."""
    labels = maintenance_labels(owner, spec.task, settings.release)
    env: list[dict[str, Any]] = [{"name": "ENGRAM_DATA_DIR", "value": DATA_DIR}]
    if spec.retention is not None:
        env.append({"name": BACKUP_KEEP_ENV, "value": str(spec.retention.keep)})
    mounts: list[dict[str, Any]] = [
        {"name": "data", "mountPath": DATA_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "data", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if spec.task is Task.backup:
        env.append({"name": BACKUP_DIR_ENV, "value": BACKUP_DIR})
        mounts.append({"name": "backups", "mountPath": BACKUP_DIR})
        volumes.append(
            {"name": "backups", "persistentVolumeClaim": {"claimName": settings.backup_pvc}}
            if settings.backup_pvc
            else {"name": "backups", "emptyDir": {}}
        )
    env_from: list[dict[str, Any]] = []
    if settings.job_env_configmap:
        env_from.append({"configMapRef": {"name": settings.job_env_configmap}})
    for secret in settings.job_env_secret_names:
        env_from.append({"secretRef": {"name": secret}})
    # Provider API keys: referenced by Secret and key, resolved by the kubelet, never read here.
    for ref in settings.job_secret_env:
        env.append(
            {"name": ref.env, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}}
        )
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": [ENTRYPOINT],
        "args": job_args(spec.task, dry_run=spec.dry_run),
        # After envFrom, so these win over the shared env ConfigMap.
        "env": env,
        "resources": {
            "requests": _quantities(spec.resources.requests, DEFAULT_REQUESTS),
            "limits": _quantities(spec.resources.limits, DEFAULT_LIMITS),
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        # The summary line is the run's result: the CLI writes it to the termination log, and
        # if it dies first Kubernetes keeps the log tail, which ends with the same line.
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts,
    }
    if env_from:
        container["envFrom"] = env_from
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": settings.job_service_account or "default",
        # Maintenance talks to Qdrant, never to the Kubernetes API.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": settings.job_uid,
            "runAsGroup": settings.job_uid,
            "fsGroup": settings.job_uid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    cron_spec: dict[str, Any] = {
        "schedule": spec.effective_schedule,
        "suspend": spec.suspend,
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": STARTING_DEADLINE_SECONDS,
        "successfulJobsHistoryLimit": JOBS_KEPT,
        "failedJobsHistoryLimit": JOBS_KEPT,
        "jobTemplate": {
            "metadata": {"labels": labels},
            "spec": {
                "backoffLimit": JOB_BACKOFF_LIMIT,
                "activeDeadlineSeconds": JOB_DEADLINE_SECONDS,
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
    }
    if spec.time_zone is not None:
        cron_spec["timeZone"] = spec.time_zone
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": cronjob_name(owner.name),
            "namespace": owner.namespace,
            "labels": labels,
            "ownerReferences": [owner.reference()],
        },
        "spec": cron_spec,
    }


def build_cronjob_patch(desired: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch that makes an existing CronJob match ``desired``.

    Lists (containers, volumes) are replaced whole by a merge patch; the one optional map key we
    manage, ``timeZone``, is sent as null when unset so an old value is removed.
    """
    spec = dict(desired["spec"])
    spec.setdefault("timeZone", None)
    return {"metadata": {"labels": desired["metadata"]["labels"]}, "spec": spec}


def build_agent_status(
    *,
    verdict: Verdict,
    generation: int | None,
    previous: Mapping[str, Any],
    now: str,
) -> dict[str, Any]:
    """An EngramAgent's status: Ready, where its token is, and which generation it reflects."""
    return {
        "agentName": verdict.agent_name,
        "tokenSecret": (
            {"name": verdict.token_secret, "key": TOKEN_KEY} if verdict.token_secret else None
        ),
        "observedGeneration": generation,
        "conditions": [
            ready_condition(
                ready=verdict.ready,
                reason=verdict.reason,
                message=verdict.message,
                generation=generation,
                previous=previous.get("conditions"),
                now=now,
            )
        ],
    }


def build_maintenance_status(
    *,
    ready: bool,
    reason: str,
    message: str,
    cronjob: str | None,
    generation: int | None,
    previous: Mapping[str, Any],
    now: str,
) -> dict[str, Any]:
    """The part of an EngramMaintenance's status the reconciler owns (runs are separate)."""
    return {
        "cronJob": cronjob,
        "observedGeneration": generation,
        "conditions": [
            ready_condition(
                ready=ready,
                reason=reason,
                message=message,
                generation=generation,
                previous=previous.get("conditions"),
                now=now,
            )
        ],
    }


def build_runs_status(history: Sequence[RunRecord]) -> dict[str, Any]:
    """``lastRun`` (the newest run) and ``history`` (newest first) for a status patch."""
    return {
        "lastRun": history[0].as_status() if history else None,
        "history": [record.as_status() for record in history],
    }

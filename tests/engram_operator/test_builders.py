"""The pure builders: every manifest and status document the operator writes."""

from __future__ import annotations

import base64
from typing import Any

import kubernetes_validate
import pytest

from engram_contract.permissions import (
    CONFIGMAP_KEY,
    AgentPolicy,
    PermissionConfig,
    dump_permission_config,
    load_permission_config,
)
from engram_contract.report import RunResult
from engram_operator.builders import (
    Owner,
    build_agent_status,
    build_cronjob,
    build_cronjob_patch,
    build_maintenance_status,
    build_permission_configmap,
    build_runs_status,
    build_token_patch,
    build_token_secret,
    decode_token,
)
from engram_operator.conditions import ready_condition
from engram_operator.drift import matches
from engram_operator.folding import Verdict
from engram_operator.models import RunRecord, parse_maintenance_spec
from tests.engram_operator.kopf_harness import IMAGE, make_settings

AGENT_OWNER = Owner("engram.dev/v1alpha1", "EngramAgent", "writer", "team-a", "uid-agent")
MAINT_OWNER = Owner("engram.dev/v1alpha1", "EngramMaintenance", "nightly", "engram", "uid-maint")
NOW = "2026-11-29T10:00:00Z"


def cronjob(**spec: Any) -> dict[str, Any]:
    settings = spec.pop("settings", None) or make_settings()
    return build_cronjob(
        owner=MAINT_OWNER,
        spec=parse_maintenance_spec(spec, resource_name=MAINT_OWNER.name),
        settings=settings,
    )


def pod_spec(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def container(manifest: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod_spec(manifest)["containers"]
    return dict(only)


def test_permission_configmap_holds_exactly_the_dumped_config() -> None:
    config = PermissionConfig(agents={"main": AgentPolicy(read=["global"])})
    text = dump_permission_config(config)
    cm = build_permission_configmap(name="engram-permissions", namespace="engram", text=text)
    assert cm["data"] == {CONFIGMAP_KEY: text}
    assert load_permission_config(cm["data"][CONFIGMAP_KEY]) == config
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == ("engram-permissions", "engram")
    assert cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "engram-operator"
    kubernetes_validate.validate(cm, "1.34", strict=True)


def test_token_secret_is_owned_by_its_agent_and_holds_the_token_in_base64() -> None:
    secret = build_token_secret(owner=AGENT_OWNER, token="t0ken-" * 8)
    assert secret["metadata"]["name"] == "writer-engram-token"
    assert secret["metadata"]["namespace"] == "team-a"
    assert secret["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "engram.dev/v1alpha1",
            "kind": "EngramAgent",
            "name": "writer",
            "uid": "uid-agent",
            "controller": True,
        }
    ]
    # blockOwnerDeletion would need `update` on engramagents/finalizers under the
    # OwnerReferencesPermissionEnforcement admission plugin (OpenShift's default).
    assert "blockOwnerDeletion" not in secret["metadata"]["ownerReferences"][0]
    assert secret["metadata"]["labels"]["engram.dev/agent"] == "writer"
    assert base64.b64decode(secret["data"]["token"]).decode() == "t0ken-" * 8
    assert decode_token(secret) == "t0ken-" * 8
    assert AGENT_OWNER.owns(secret)
    kubernetes_validate.validate(secret, "1.34", strict=True)


def test_token_patch_replaces_only_the_token() -> None:
    assert build_token_patch("abc") == {"data": {"token": base64.b64encode(b"abc").decode()}}


@pytest.mark.parametrize(
    "data",
    [{}, {"token": ""}, {"token": "%%%not-base64"}, {"token": base64.b64encode(b"\xff").decode()}],
)
def test_unusable_token_data_decodes_to_nothing(data: dict[str, str]) -> None:
    assert decode_token({"data": data}) is None


def test_daily_cronjob_runs_the_maintenance_command_with_a_summary_line() -> None:
    manifest = cronjob(task="daily", schedule="0 3 * * *", timeZone="Etc/UTC")
    main = container(manifest)
    assert main["command"] == ["engram"]
    assert main["args"] == ["maintenance", "daily", "--summary-line"]
    assert main["image"] == IMAGE
    assert main["imagePullPolicy"] == "IfNotPresent"
    assert main["env"] == [{"name": "ENGRAM_DATA_DIR", "value": "/var/lib/engram"}]
    assert manifest["spec"]["schedule"] == "0 3 * * *"
    assert manifest["spec"]["timeZone"] == "Etc/UTC"


def test_weekly_dry_run_adds_the_dry_run_flag() -> None:
    main = container(cronjob(task="weekly", schedule="0 4 * * 0", dryRun=True))
    assert main["args"] == ["maintenance", "weekly", "--summary-line", "--dry-run"]


def test_backup_runs_engram_backup_with_retention_on_the_backup_claim() -> None:
    manifest = cronjob(
        task="backup",
        schedule="15 2 * * *",
        retention={"keep": 14},
        settings=make_settings(backup_pvc="engram-backups"),
    )
    assert container(manifest)["args"] == ["backup", "--summary-line"]
    assert {"name": "ENGRAM_MAINTENANCE__BACKUP__KEEP", "value": "14"} in container(manifest)["env"]
    mounts = {m["name"]: m["mountPath"] for m in container(manifest)["volumeMounts"]}
    assert mounts["backups"] == "/var/lib/engram/backups"
    # The service's default is beside the data dir, so the Job says where its claim is.
    backup_dir = {"name": "ENGRAM_MAINTENANCE__BACKUP__DIR", "value": "/var/lib/engram/backups"}
    assert backup_dir in container(manifest)["env"]
    volumes = {v["name"]: v for v in pod_spec(manifest)["volumes"]}
    assert volumes["backups"]["persistentVolumeClaim"] == {"claimName": "engram-backups"}


def test_backup_without_a_claim_uses_an_empty_dir() -> None:
    manifest = cronjob(task="backup", schedule="15 2 * * *")
    volumes = {v["name"]: v for v in pod_spec(manifest)["volumes"]}
    assert volumes["backups"] == {"name": "backups", "emptyDir": {}}


def test_non_backup_tasks_get_no_backup_volume() -> None:
    manifest = cronjob(task="daily", schedule="0 3 * * *")
    assert "backups" not in {v["name"] for v in pod_spec(manifest)["volumes"]}


def test_cronjob_forbids_overlap_and_does_not_retry_a_failed_run() -> None:
    manifest = cronjob(task="daily", schedule="0 3 * * *")
    assert manifest["spec"]["concurrencyPolicy"] == "Forbid"
    job = manifest["spec"]["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    assert job["activeDeadlineSeconds"] == 7200
    assert pod_spec(manifest)["restartPolicy"] == "Never"


def test_maintenance_pods_are_restricted_and_get_no_api_token() -> None:
    manifest = cronjob(task="daily", schedule="0 3 * * *")
    pod = pod_spec(manifest)
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == "engram-maintenance"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container(manifest)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    # A read-only root needs writable scratch space for the data dir and /tmp.
    mounts = {m["mountPath"] for m in container(manifest)["volumeMounts"]}
    assert {"/var/lib/engram", "/tmp"} <= mounts


def test_the_termination_message_falls_back_to_the_log_tail() -> None:
    main = container(cronjob(task="daily", schedule="0 3 * * *"))
    assert main["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert main["terminationMessagePath"] == "/dev/termination-log"


def test_env_sources_come_from_settings_and_are_omitted_when_unset() -> None:
    main = container(cronjob(task="daily", schedule="0 3 * * *"))
    assert main["envFrom"] == [
        {"configMapRef": {"name": "engram-env"}},
        {"secretRef": {"name": "engram-qdrant"}},
    ]
    bare = make_settings(job_env_configmap="", job_env_secret="", job_service_account="")
    manifest = cronjob(task="daily", schedule="0 3 * * *", settings=bare)
    assert "envFrom" not in container(manifest)
    assert pod_spec(manifest)["serviceAccountName"] == "default"


def test_several_env_secrets_are_loaded_in_order_without_repeats() -> None:
    settings = make_settings(
        job_env_secret="engram-qdrant", job_env_secrets="team-keys, engram-qdrant,more-keys"
    )
    main = container(cronjob(task="daily", schedule="0 3 * * *", settings=settings))
    assert main["envFrom"] == [
        {"configMapRef": {"name": "engram-env"}},
        {"secretRef": {"name": "engram-qdrant"}},
        {"secretRef": {"name": "team-keys"}},
        {"secretRef": {"name": "more-keys"}},
    ]
    # The plural form alone is enough.
    only_plural = make_settings(job_env_secret="", job_env_secrets="a-keys,b-keys")
    main = container(cronjob(task="daily", schedule="0 3 * * *", settings=only_plural))
    assert main["envFrom"][1:] == [
        {"secretRef": {"name": "a-keys"}},
        {"secretRef": {"name": "b-keys"}},
    ]


PROVIDER_KEYS = (
    "ENGRAM_EMBEDDINGS__PRIMARY__API_KEY=openai-key:api-key,"
    "ENGRAM_LLM__PRIMARY__API_KEY=gemini-key:token"
)


@pytest.mark.parametrize("task", ["daily", "weekly", "backup"])
def test_provider_keys_reach_every_task_as_secret_key_refs(task: str) -> None:
    settings = make_settings(job_secret_env=PROVIDER_KEYS)
    spec: dict[str, Any] = {"task": task, "schedule": "0 3 * * *"}
    if task == "backup":
        spec["retention"] = {"keep": 3}
    manifest = cronjob(settings=settings, **spec)
    env = container(manifest)["env"]
    assert env[0] == {"name": "ENGRAM_DATA_DIR", "value": "/var/lib/engram"}
    refs = [e for e in env if "valueFrom" in e]
    assert refs == [
        {
            "name": "ENGRAM_EMBEDDINGS__PRIMARY__API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "openai-key", "key": "api-key"}},
        },
        {
            "name": "ENGRAM_LLM__PRIMARY__API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "gemini-key", "key": "token"}},
        },
    ]
    # References only: nothing in the manifest could be key material.
    assert all(set(e) == {"name", "value"} for e in env if e not in refs)
    kubernetes_validate.validate(manifest, "1.34", strict=True)


def test_without_provider_keys_the_env_is_only_the_operators_own() -> None:
    env = container(cronjob(task="daily", schedule="0 3 * * *"))["env"]
    assert env == [{"name": "ENGRAM_DATA_DIR", "value": "/var/lib/engram"}]


def test_resources_override_the_defaults_key_by_key() -> None:
    main = container(
        cronjob(
            task="weekly", schedule="0 4 * * 0", resources={"limits": {"memory": "4Gi", "cpu": "2"}}
        )
    )
    assert main["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }


def test_suspended_maintenance_without_schedule_gets_a_schedule_that_never_fires() -> None:
    manifest = cronjob(task="daily", suspend=True)
    assert manifest["spec"]["suspend"] is True
    assert manifest["spec"]["schedule"] == "0 0 30 2 *"
    assert "timeZone" not in manifest["spec"]


def test_cronjob_is_owned_and_labelled_down_to_its_pods() -> None:
    manifest = cronjob(task="weekly", schedule="0 4 * * 0")
    assert manifest["metadata"]["name"] == "nightly"
    assert manifest["metadata"]["namespace"] == "engram"
    assert manifest["metadata"]["ownerReferences"] == [MAINT_OWNER.reference()]
    expected = {
        "app.kubernetes.io/managed-by": "engram-operator",
        "app.kubernetes.io/part-of": "engram",
        "app.kubernetes.io/component": "maintenance",
        # The release: Qdrant's NetworkPolicy and the Job watch select on it.
        "app.kubernetes.io/instance": "engram",
        "engram.dev/maintenance": "nightly",
        "engram.dev/task": "weekly",
    }
    assert manifest["metadata"]["labels"] == expected
    assert manifest["spec"]["jobTemplate"]["metadata"]["labels"] == expected
    assert manifest["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"] == expected


@pytest.mark.parametrize(
    "spec",
    [
        {"task": "daily", "schedule": "0 3 * * *", "timeZone": "Europe/Paris"},
        {
            "task": "weekly",
            "schedule": "@weekly",
            "dryRun": True,
            "resources": {"limits": {"memory": "4Gi"}},
        },
        {"task": "backup", "schedule": "15 2 * * *", "retention": {"keep": 3}},
        {"task": "daily", "suspend": True},
    ],
)
def test_every_cronjob_is_a_valid_kubernetes_object(spec: dict[str, Any]) -> None:
    kubernetes_validate.validate(cronjob(**spec), "1.34", strict=True)


def test_cronjob_patch_removes_an_unset_time_zone_and_matches_the_desired_cronjob() -> None:
    desired = cronjob(task="daily", schedule="0 3 * * *")
    patch = build_cronjob_patch(desired)
    assert patch["spec"]["timeZone"] is None
    assert patch["metadata"] == {"labels": desired["metadata"]["labels"]}
    # A server-defaulted copy of the desired CronJob is in shape; an edited one is not.
    served = {**desired, "spec": {**desired["spec"], "extraServerDefault": 1}}
    assert matches(patch, served)
    edited = {**served, "spec": {**served["spec"], "schedule": "* * * * *"}}
    assert not matches(patch, edited)
    with_tz = {**served, "spec": {**served["spec"], "timeZone": "UTC"}}
    assert not matches(patch, with_tz)


def test_ready_condition_keeps_its_transition_time_while_the_status_holds() -> None:
    first = ready_condition(
        ready=True, reason="A", message="m", generation=1, previous=None, now=NOW
    )
    assert first == {
        "type": "Ready",
        "status": "True",
        "reason": "A",
        "message": "m",
        "lastTransitionTime": NOW,
        "observedGeneration": 1,
    }
    later = "2026-11-29T11:00:00Z"
    same = ready_condition(
        ready=True, reason="B", message="n", generation=2, previous=[first], now=later
    )
    assert same["lastTransitionTime"] == NOW
    flipped = ready_condition(
        ready=False, reason="C", message="o", generation=2, previous=[first], now=later
    )
    assert flipped["lastTransitionTime"] == later
    assert (
        len(
            ready_condition(
                ready=True, reason="A", message="x" * 5000, generation=1, previous=None, now=NOW
            )["message"]
        )
        == 1024
    )


def test_agent_status_says_ready_where_the_token_is_and_which_generation() -> None:
    status = build_agent_status(
        verdict=Verdict(
            True, "Configured", "in engram/engram-permissions", "writer", "writer-engram-token"
        ),
        generation=4,
        previous={},
        now=NOW,
    )
    assert status["agentName"] == "writer"
    assert status["tokenSecret"] == {"name": "writer-engram-token", "key": "token"}
    assert status["observedGeneration"] == 4
    assert status["conditions"][0]["status"] == "True"
    assert status["conditions"][0]["observedGeneration"] == 4


def test_agent_status_without_a_token_clears_the_token_secret() -> None:
    status = build_agent_status(
        verdict=Verdict(True, "Configured", "ok", "analyst", None),
        generation=1,
        previous={},
        now=NOW,
    )
    assert status["tokenSecret"] is None  # a merge patch deletes the field


def test_unchanged_status_matches_the_stored_one_so_nothing_is_written() -> None:
    verdict = Verdict(True, "Configured", "ok", "writer", "writer-engram-token")
    first = build_agent_status(verdict=verdict, generation=1, previous={}, now=NOW)
    stored = {key: value for key, value in first.items() if value is not None}
    again = build_agent_status(
        verdict=verdict, generation=1, previous=stored, now="2026-11-30T00:00:00Z"
    )
    assert matches(again, stored)
    bumped = build_agent_status(verdict=verdict, generation=2, previous=stored, now=NOW)
    assert not matches(bumped, stored)


def test_maintenance_status_and_runs_status() -> None:
    status = build_maintenance_status(
        ready=False,
        reason="InvalidSpec",
        message="bad",
        cronjob=None,
        generation=2,
        previous={},
        now=NOW,
    )
    assert status["cronJob"] is None
    assert status["observedGeneration"] == 2
    assert status["conditions"][0]["reason"] == "InvalidSpec"
    runs = [
        RunRecord(job="b", start_time="2026-11-29T03:00:00Z", result=RunResult.succeeded, merged=1),
        RunRecord(job="a", start_time="2026-11-28T03:00:00Z", result=RunResult.failed),
    ]
    assert build_runs_status(runs) == {
        "lastRun": {
            "job": "b",
            "startTime": "2026-11-29T03:00:00Z",
            "result": "Succeeded",
            "merged": 1,
            "archived": 0,
            "created": 0,
            "conflicts": 0,
            "errors": 0,
            "message": "",
        },
        "history": [runs[0].as_status(), runs[1].as_status()],
    }
    assert build_runs_status([]) == {"lastRun": None, "history": []}

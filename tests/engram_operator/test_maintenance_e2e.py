"""EngramMaintenances end to end: CronJobs, and Job results copied into status."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engram_contract.report import MaintenanceSummary, RunResult, Task
from engram_operator.kube import CRONJOBS, ENGRAM_MAINTENANCES, JOBS, SECRETS
from tests.engram_operator.kopf_harness import (
    IMAGE,
    OPERATOR_NS,
    RELEASE_REF,
    Cluster,
    StartOperator,
    events_about,
    eventually,
    make_settings,
    run_job,
)

pytestmark = pytest.mark.usefixtures("cluster")
NS = OPERATOR_NS


def maintenance_body(name: str, **spec: Any) -> dict[str, Any]:
    # Outside the release namespace a resource names its release.
    spec.setdefault("release", RELEASE_REF)
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramMaintenance",
        "metadata": {"name": name},
        "spec": spec,
    }


def summary_line(task: Task = Task.daily, **counts: Any) -> str:
    values: dict[str, Any] = {
        "task": task,
        "result": RunResult.succeeded,
        "started_at": "2026-11-29T03:00:02Z",
        "finished_at": "2026-11-29T03:01:38Z",
        "elapsed_s": 96.0,
    }
    values.update(counts)
    return MaintenanceSummary(**values).to_line()


def ready(obj: dict[str, Any] | None) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == "Ready":
            return dict(cond)
    return {}


async def maintenance_where(cluster: Cluster, name: str, check: Any, what: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        obj = await cluster.get(ENGRAM_MAINTENANCES, NS, name)
        return obj if obj is not None and check(obj) else None

    return await eventually(probe, what=what)


async def cronjob_where(cluster: Cluster, name: str, check: Any, what: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        obj = await cluster.get(CRONJOBS, NS, name)
        return obj if obj is not None and check(obj) else None

    return await eventually(probe, what=what)


def last_run(obj: dict[str, Any]) -> dict[str, Any]:
    return dict((obj.get("status") or {}).get("lastRun") or {})


async def test_a_maintenance_gets_an_owned_cronjob_and_a_ready_status(
    cluster: Cluster, operator: Any
) -> None:
    created = await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *", timeZone="Etc/UTC"),
    )
    cronjob = await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob")
    spec = cronjob["spec"]
    assert spec["schedule"] == "0 3 * * *"
    assert spec["timeZone"] == "Etc/UTC"
    assert spec["suspend"] is False
    assert spec["concurrencyPolicy"] == "Forbid"
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == IMAGE
    assert [*container["command"], *container["args"]] == [
        "engram",
        "maintenance",
        "daily",
        "--summary-line",
    ]
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == "engram-maintenance"
    assert container["envFrom"] == [
        {"configMapRef": {"name": "engram-env"}},
        {"secretRef": {"name": "engram-qdrant"}},
    ]
    owner = cronjob["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "EngramMaintenance",
        created["metadata"]["uid"],
        True,
    )

    obj = await maintenance_where(
        cluster, "engram-daily", lambda o: ready(o).get("status") == "True", "Ready"
    )
    assert ready(obj)["reason"] == "Scheduled"
    assert "engram maintenance daily --summary-line" in ready(obj)["message"]
    assert obj["status"]["cronJob"] == "engram-daily"
    assert obj["status"]["observedGeneration"] == 1


async def test_changing_the_spec_patches_the_cronjob_with_a_merge_patch(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-weekly", task="weekly", schedule="0 4 * * 0", timeZone="Etc/UTC"),
    )
    await cronjob_where(cluster, "engram-weekly", lambda c: True, "CronJob")

    await cluster.patch(
        ENGRAM_MAINTENANCES,
        NS,
        "engram-weekly",
        {"spec": {"schedule": "30 5 * * 6", "timeZone": None, "suspend": True, "dryRun": True}},
    )
    cronjob = await cronjob_where(
        cluster, "engram-weekly", lambda c: c["spec"]["schedule"] == "30 5 * * 6", "new schedule"
    )
    assert "timeZone" not in cronjob["spec"]
    assert cronjob["spec"]["suspend"] is True
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "maintenance",
        "weekly",
        "--summary-line",
        "--dry-run",
    ]
    obj = await maintenance_where(
        cluster, "engram-weekly", lambda o: ready(o).get("reason") == "Suspended", "Suspended"
    )
    assert obj["status"]["observedGeneration"] == 2
    patches = [
        req
        for req in cluster.operator_requests()
        if req.method.value == "PATCH" and "/cronjobs/" in req.url.path
    ]
    assert patches
    assert {req.headers["Content-Type"] for req in patches} == {"application/merge-patch+json"}


async def test_a_finished_job_lands_in_last_run_and_history(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob")

    line = summary_line(merged=12, archived=7, created=2, conflicts=1, errors=0, message="ok")
    await run_job(cluster, NS, "engram-daily", "engram-daily-29400300", message=line)

    obj = await maintenance_where(cluster, "engram-daily", last_run, "lastRun")
    assert last_run(obj) == {
        "job": "engram-daily-29400300",
        "startTime": "2026-11-29T03:00:00Z",
        "completionTime": "2026-11-29T03:01:40Z",
        "result": "Succeeded",
        "merged": 12,
        "archived": 7,
        "created": 2,
        "conflicts": 1,
        "errors": 0,
        "message": "ok",
    }
    assert obj["status"]["history"] == [obj["status"]["lastRun"]]

    async def run_event() -> list[tuple[str, str, str]]:
        return [
            e for e in await events_about(cluster, NS, "engram-daily") if e[1] == "RunSucceeded"
        ]

    ((kind, _, message),) = await eventually(run_event, what="a RunSucceeded event")
    assert kind == "Normal"
    assert "engram-daily-29400300" in message
    assert "merged 12, archived 7" in message


async def test_a_failed_job_is_recorded_as_failed_with_its_reason(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body(
            "engram-backup", task="backup", schedule="15 2 * * *", retention={"keep": 7}
        ),
    )
    cronjob = await cronjob_where(cluster, "engram-backup", lambda c: True, "CronJob")
    backup = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert backup["args"] == ["backup", "--summary-line"]
    assert {"name": "ENGRAM_MAINTENANCE__BACKUP__KEEP", "value": "7"} in backup["env"]

    line = summary_line(
        Task.backup, result=RunResult.failed, errors=1, message="qdrant unreachable"
    )
    await run_job(cluster, NS, "engram-backup", "engram-backup-1", message=line, succeeded=False)

    obj = await maintenance_where(cluster, "engram-backup", last_run, "lastRun")
    run = last_run(obj)
    assert run["result"] == "Failed"
    assert run["errors"] == 1
    assert "BackoffLimitExceeded" in run["message"]
    assert "qdrant unreachable" in run["message"]

    async def run_event() -> list[tuple[str, str, str]]:
        return [e for e in await events_about(cluster, NS, "engram-backup") if e[1] == "RunFailed"]

    ((kind, _, _),) = await eventually(run_event, what="a RunFailed event")
    assert kind == "Warning"


async def test_an_unreadable_run_is_failed_and_the_next_run_still_records(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob")

    await run_job(
        cluster,
        NS,
        "engram-daily",
        "engram-daily-1",
        message="Traceback (most recent call last):\nMemoryError",
        started="2026-11-28T03:00:00Z",
        finished="2026-11-28T03:00:09Z",
    )
    obj = await maintenance_where(cluster, "engram-daily", last_run, "first lastRun")
    assert last_run(obj)["result"] == "Failed"
    assert "result is unknown: no summary line" in last_run(obj)["message"]

    await run_job(cluster, NS, "engram-daily", "engram-daily-2", message=summary_line(merged=1))
    obj = await maintenance_where(
        cluster, "engram-daily", lambda o: last_run(o).get("job") == "engram-daily-2", "second run"
    )
    assert last_run(obj)["result"] == "Succeeded"
    assert [run["job"] for run in obj["status"]["history"]] == ["engram-daily-2", "engram-daily-1"]


async def test_history_keeps_the_newest_runs_up_to_the_limit(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *", historyLimit=2),
    )
    await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob")
    for day in (1, 2, 3):
        await run_job(
            cluster,
            NS,
            "engram-daily",
            f"engram-daily-{day}",
            message=summary_line(merged=day),
            started=f"2026-11-0{day}T03:00:00Z",
            finished=f"2026-11-0{day}T03:01:00Z",
        )
        await maintenance_where(
            cluster,
            "engram-daily",
            lambda o, day=day: last_run(o).get("job") == f"engram-daily-{day}",
            f"run {day}",
        )
    obj = await cluster.get(ENGRAM_MAINTENANCES, NS, "engram-daily")
    assert [run["job"] for run in obj["status"]["history"]] == ["engram-daily-3", "engram-daily-2"]
    assert last_run(obj)["merged"] == 3


async def test_a_job_not_made_by_the_cronjob_is_ignored(cluster: Cluster, operator: Any) -> None:
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob")
    await cluster.create(
        CRONJOBS,
        NS,
        {
            "metadata": {"name": "impostor"},
            "spec": {
                "schedule": "* * * * *",
                "jobTemplate": {
                    "metadata": {
                        "labels": {
                            "app.kubernetes.io/managed-by": "engram-operator",
                            "engram.dev/maintenance": "engram-daily",
                        }
                    },
                    "spec": {},
                },
            },
        },
    )
    await run_job(cluster, NS, "impostor", "impostor-1", message=summary_line(merged=99))
    # A genuine run afterwards is recorded; the impostor's never is.
    await run_job(cluster, NS, "engram-daily", "engram-daily-1", message=summary_line(merged=1))
    obj = await maintenance_where(cluster, "engram-daily", last_run, "lastRun")
    assert [run["job"] for run in obj["status"]["history"]] == ["engram-daily-1"]


async def test_a_foreign_cronjob_is_not_taken_over(cluster: Cluster, operator: Any) -> None:
    await cluster.create(
        CRONJOBS,
        NS,
        {
            "metadata": {"name": "engram-daily"},
            "spec": {"schedule": "1 1 * * *", "jobTemplate": {}},
        },
    )
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    obj = await maintenance_where(
        cluster, "engram-daily", lambda o: ready(o).get("reason") == "CronJobConflict", "conflict"
    )
    assert ready(obj)["status"] == "False"
    cronjob = await cluster.get(CRONJOBS, NS, "engram-daily")
    assert cronjob["spec"]["schedule"] == "1 1 * * *"


async def test_an_invalid_maintenance_is_not_ready_and_gets_no_cronjob(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("bad-backup", task="backup", schedule="15 2 * * *", dryRun=True),
    )
    obj = await maintenance_where(
        cluster, "bad-backup", lambda o: ready(o).get("reason") == "InvalidSpec", "InvalidSpec"
    )
    assert "dryRun is not supported for backup" in ready(obj)["message"]
    assert await cluster.get(CRONJOBS, NS, "bad-backup") is None


async def test_a_job_that_finished_unseen_is_collected_by_the_resync(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(resync_seconds=0.3))
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob")
    job = await run_job(
        cluster, NS, "engram-daily", "engram-daily-1", message=summary_line(merged=4)
    )
    await maintenance_where(cluster, "engram-daily", last_run, "lastRun")
    # Forget the run, as if the status had been lost; no Job event announces it again.
    await cluster.patch(
        ENGRAM_MAINTENANCES,
        NS,
        "engram-daily",
        {"status": {"lastRun": None, "history": None}},
        "status",
    )
    obj = await maintenance_where(cluster, "engram-daily", last_run, "lastRun restored by resync")
    assert last_run(obj)["job"] == job["metadata"]["name"]
    assert last_run(obj)["merged"] == 4


async def test_a_job_that_finished_while_the_operator_was_down_is_recorded_at_start(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    first = await start_operator()
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob")
    await first.stop()

    await run_job(cluster, NS, "engram-daily", "engram-daily-1", message=summary_line(merged=5))
    await start_operator()
    obj = await maintenance_where(cluster, "engram-daily", last_run, "lastRun")
    assert last_run(obj)["merged"] == 5


async def test_deleting_a_maintenance_leaves_its_cronjob_to_garbage_collection(
    cluster: Cluster, operator: Any
) -> None:
    created = await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await maintenance_where(cluster, "engram-daily", lambda o: ready(o), "Ready")
    await cluster.delete(ENGRAM_MAINTENANCES, NS, "engram-daily")
    # No finalizer: the resource goes at once, whether or not the operator is running.
    assert await cluster.get(ENGRAM_MAINTENANCES, NS, "engram-daily") is None
    cronjob = await cluster.get(CRONJOBS, NS, "engram-daily")
    # Kubernetes' garbage collector deletes the CronJob (and its Jobs) through this reference.
    assert cronjob["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "engram.dev/v1alpha1",
            "kind": "EngramMaintenance",
            "name": "engram-daily",
            "uid": created["metadata"]["uid"],
            "controller": True,
        }
    ]
    assert await cluster.list_objects(JOBS, NS) == []


async def test_a_hand_edited_cronjob_is_put_back_by_the_resync(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(resync_seconds=0.3))
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob")
    await cluster.patch(
        CRONJOBS,
        NS,
        "engram-daily",
        {"spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow"}},
    )
    cronjob = await cronjob_where(
        cluster, "engram-daily", lambda c: c["spec"]["schedule"] == "0 3 * * *", "schedule restored"
    )
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"


async def test_provider_keys_reach_the_jobs_as_references_the_operator_never_reads(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    key_material = "sk-live-do-not-leak-0123456789"
    for name in ("openai-key", "gemini-key"):
        await cluster.create(
            SECRETS,
            NS,
            {"metadata": {"name": name}, "stringData": {"api-key": key_material}},
        )
    await start_operator(
        make_settings(
            job_env_secret="",
            job_env_secrets="engram-qdrant,team-keys",
            job_secret_env=(
                "ENGRAM_EMBEDDINGS__PRIMARY__API_KEY=openai-key:api-key,"
                "ENGRAM_LLM__PRIMARY__API_KEY=gemini-key:api-key"
            ),
        )
    )
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-weekly", task="weekly", schedule="0 4 * * 0"),
    )
    cronjob = await cronjob_where(cluster, "engram-weekly", lambda c: True, "CronJob")
    container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [
        {"configMapRef": {"name": "engram-env"}},
        {"secretRef": {"name": "engram-qdrant"}},
        {"secretRef": {"name": "team-keys"}},
    ]
    assert [e for e in container["env"] if "valueFrom" in e] == [
        {
            "name": "ENGRAM_EMBEDDINGS__PRIMARY__API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "openai-key", "key": "api-key"}},
        },
        {
            "name": "ENGRAM_LLM__PRIMARY__API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "gemini-key", "key": "api-key"}},
        },
    ]
    await maintenance_where(
        cluster, "engram-weekly", lambda o: ready(o).get("status") == "True", "Ready"
    )
    # The kubelet resolves the references; the operator never reads those Secrets, so the key
    # cannot end up in anything it writes.
    secret_reads = [
        req.url.path
        for req in cluster.operator_requests()
        if "/secrets/openai-key" in req.url.path or "/secrets/gemini-key" in req.url.path
    ]
    assert secret_reads == []
    written = [json.dumps(req.data) for req in cluster.operator_requests() if req.data]
    assert written
    assert not [body for body in written if key_material in body]


async def test_a_maintenance_outside_the_job_namespace_is_refused_not_scheduled(
    cluster: Cluster, operator: Any
) -> None:
    other = "team-a"
    await cluster.create(
        ENGRAM_MAINTENANCES,
        other,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )

    async def refused() -> dict[str, Any] | None:
        obj = await cluster.get(ENGRAM_MAINTENANCES, other, "engram-daily")
        return obj if ready(obj).get("reason") == "WrongNamespace" else None

    obj = await eventually(refused, what="WrongNamespace")
    condition = ready(obj)
    assert condition["status"] == "False"
    assert f"must be in namespace {NS}" in condition["message"]
    assert "ENGRAM_OPERATOR_JOB_NAMESPACE" in condition["message"]
    assert obj["status"].get("cronJob") is None
    assert await cluster.get(CRONJOBS, other, "engram-daily") is None

    async def warning() -> list[tuple[str, str, str]]:
        return [e for e in await events_about(cluster, other, "engram-daily") if e[0] == "Warning"]

    ((_, reason, _),) = await eventually(warning, what="a Warning event")
    assert reason == "WrongNamespace"

    # The operator carries on: the same maintenance in the job namespace is scheduled.
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await cronjob_where(cluster, "engram-daily", lambda c: True, "CronJob in the job namespace")
    # A permanent refusal: kopf does not retry it (no second status patch, no CronJob).
    assert await cluster.get(CRONJOBS, other, "engram-daily") is None
    status_patches = [
        req
        for req in cluster.operator_requests()
        if req.method.value == "PATCH"
        and req.url.path.endswith(f"/namespaces/{other}/engrammaintenances/engram-daily/status")
    ]
    assert len(status_patches) == 1


async def test_the_job_namespace_setting_moves_where_maintenance_may_run(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(job_namespace="team-a"))
    await cluster.create(
        ENGRAM_MAINTENANCES,
        "team-a",
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )
    await cluster.create(
        ENGRAM_MAINTENANCES,
        NS,
        maintenance_body("engram-daily", task="daily", schedule="0 3 * * *"),
    )

    async def scheduled_in_team_a() -> dict[str, Any] | None:
        return await cluster.get(CRONJOBS, "team-a", "engram-daily")

    await eventually(scheduled_in_team_a, what="CronJob in team-a")
    obj = await maintenance_where(
        cluster, "engram-daily", lambda o: ready(o).get("reason") == "WrongNamespace", "refused"
    )
    assert "must be in namespace team-a" in ready(obj)["message"]
    assert await cluster.get(CRONJOBS, NS, "engram-daily") is None

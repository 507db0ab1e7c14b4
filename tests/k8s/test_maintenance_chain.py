"""The maintenance chain end to end on a real control plane: EngramMaintenance -> CronJob (the
operator) -> Job (`kubectl create job --from=cronjob/...`) -> pod (the Job controller) -> the
container's command run locally with the pod's env (the harness as kubelet) -> the pod's
terminated state and termination message -> Job Complete/Failed (the Job controller) ->
`status.lastRun` (the operator) -> `kubectl get engrammaintenance`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .clis import Clis
from .conftest import unique
from .controlplane import Api, ControlPlane, wait_for
from .kubelet import Termination, play_kubelet
from .operator_process import LocalOperator
from .releases import Release

TIMEOUT_S = 60.0
# `kubectl get engrammaintenance -o wide`: every printer column.
COLUMNS = [
    "NAME", "TASK", "RELEASE", "SCHEDULE", "SUSPEND", "LAST", "RUN", "RESULT",
    "MERGED", "ARCHIVED", "CREATED", "CONFLICTS", "ERRORS", "READY", "AGE",
]  # fmt: skip


def _maintenance(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramMaintenance",
        "metadata": {"name": name},
        "spec": {"task": "daily", "schedule": "0 3 * * *", "timeZone": "Etc/UTC"},
    }


def _job_pods(api: Api, namespace: str, job: dict[str, Any]) -> list[dict[str, Any]]:
    uid = job["metadata"]["uid"]
    pods = api.get(
        f"/api/v1/namespaces/{namespace}/pods",
        labelSelector=f"batch.kubernetes.io/controller-uid={uid}",
    )["items"]
    return list(pods)


def _run_job(
    plane: ControlPlane,
    clis: Clis,
    release: Release,
    cronjob: str,
    job_name: str,
    work_dir: Path,
    overrides: dict[str, str],
) -> tuple[dict[str, Any], list[Termination]]:
    """Create a Job from the CronJob and play kubelet for each pod the Job controller makes
    until the Job has finished; returns the finished Job and what each pod's container did."""
    api = plane.api()
    ns = release.namespace
    clis.kubectl("create", "job", job_name, f"--from=cronjob/{cronjob}", "-n", ns)
    job_path = f"/apis/batch/v1/namespaces/{ns}/jobs/{job_name}"
    job = api.get(job_path)
    ran: dict[str, Termination] = {}

    def finished() -> dict[str, Any] | None:
        current = api.get(job_path)
        for cond in (current.get("status") or {}).get("conditions") or []:
            if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
                return dict(current)
        for pod in _job_pods(api, ns, job):
            name = pod["metadata"]["name"]
            if name not in ran and (pod.get("status") or {}).get("phase") == "Pending":
                ran[name] = play_kubelet(api, pod, work_dir=work_dir / name, overrides=overrides)
        return None

    done = wait_for(finished, timeout=TIMEOUT_S * 3, what=f"Job {job_name} to finish")
    return done, list(ran.values())


def _last_run(api: Api, release: Release, name: str, job: str) -> dict[str, Any] | None:
    obj = api.get(
        f"/apis/engram.dev/v1alpha1/namespaces/{release.namespace}/engrammaintenances/{name}"
    )
    last = (obj.get("status") or {}).get("lastRun")
    return dict(last) if last and last.get("job") == job else None


def test_a_job_made_from_the_cronjob_runs_and_its_result_shows_in_kubectl_get(
    control_plane: ControlPlane,
    clis: Clis,
    release: Release,
    operator: LocalOperator,
    tmp_path: Path,
) -> None:
    api = control_plane.api()
    ns = release.namespace
    name = unique("chain")
    clis.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=json.dumps(_maintenance(name)))
    wait_for(
        lambda: api.get_or_none(f"/apis/batch/v1/namespaces/{release.namespace}/cronjobs/{name}"),
        timeout=TIMEOUT_S,
        what="the CronJob",
    )
    # A local store in place of the release's Qdrant (which no kubelet runs here).
    local_store = {
        "ENGRAM_STORE__MODE": "embedded",
        "ENGRAM_STORE__URL": "",
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
    }
    job, ran = _run_job(control_plane, clis, release, name, f"{name}-ok", tmp_path, local_store)
    assert [r.exit_code for r in ran] == [0], [r.output[-2000:] for r in ran]
    assert job["status"]["succeeded"] == 1
    last = wait_for(
        lambda: _last_run(api, release, name, f"{name}-ok"),
        timeout=TIMEOUT_S,
        what="status.lastRun",
    )
    assert last["result"] == "Succeeded", last

    table = clis.kubectl("get", "engrammaintenance", name, "-n", ns, "-o", "wide").stdout
    print(table)
    header, row = table.splitlines()
    assert header.split() == COLUMNS
    # Last Run and Age are ages ("12s"); an empty store gives zero counts.
    assert re.fullmatch(
        rf"{name}\s+daily\s+0 3 \* \* \*\s+false\s+\d+s\s+Succeeded(\s+0){{5}}\s+True\s+\d+s",
        row.strip(),
    ), row

    # A run with the release's own env: its Qdrant is not reachable from here (no kubelet runs
    # it), so the run fails, and the reason reaches the status and the table.
    _, ran = _run_job(
        control_plane,
        clis,
        release,
        name,
        f"{name}-down",
        tmp_path,
        {"ENGRAM_DATA_DIR": str(tmp_path / "data2")},
    )
    assert ran, "the Job controller made no pod"
    assert all(r.exit_code != 0 for r in ran), [r.output[-2000:] for r in ran]
    last = wait_for(
        lambda: _last_run(api, release, name, f"{name}-down"),
        timeout=TIMEOUT_S,
        what="the failed lastRun",
    )
    assert last["result"] == "Failed", last
    assert last["message"].startswith("job failed: BackoffLimitExceeded"), last
    table = clis.kubectl("get", "engrammaintenance", name, "-n", ns, "-o", "wide").stdout
    print(table)
    assert " Failed " in table.splitlines()[1], table

"""Turning a finished Job and its pod into a run record (pure)."""

from __future__ import annotations

from typing import Any

from engram_contract.report import MaintenanceSummary, RunResult, Task
from engram_operator.models import COUNT_MAX, RunRecord
from engram_operator.runs import job_outcome, merge_history, parse_history, summarise_run

JOB_UID = "job-uid-1"


def line(task: Task = Task.daily, **values: Any) -> str:
    fields: dict[str, Any] = {
        "task": task,
        "result": RunResult.succeeded,
        "started_at": "2026-11-29T03:00:01Z",
        "finished_at": "2026-11-29T03:00:50Z",
        "elapsed_s": 49.0,
    }
    fields.update(values)
    return MaintenanceSummary(**fields).to_line()


def job(condition: str | None = "Complete", **status: Any) -> dict[str, Any]:
    conditions = []
    if condition == "Complete":
        conditions.append(
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-29T03:01:00Z"}
        )
    elif condition == "Failed":
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": "DeadlineExceeded",
                "message": "Job was active longer than specified deadline",
                "lastTransitionTime": "2026-11-29T05:00:00Z",
            }
        )
    body = {"startTime": "2026-11-29T03:00:00Z", "conditions": conditions}
    if condition == "Complete":
        body["completionTime"] = "2026-11-29T03:01:00Z"
    body.update(status)
    return {"metadata": {"name": "daily-1", "namespace": "engram", "uid": JOB_UID}, "status": body}


def pod(
    message: str | None,
    *,
    owner: str = JOB_UID,
    created: str = "2026-11-29T03:00:00Z",
    state: str = "state",
    container: str = "engram",
) -> dict[str, Any]:
    terminated: dict[str, Any] = {"exitCode": 0}
    if message is not None:
        terminated["message"] = message
    return {
        "metadata": {
            "name": f"p-{created}",
            "creationTimestamp": created,
            "ownerReferences": [{"kind": "Job", "uid": owner}],
        },
        "status": {"containerStatuses": [{"name": container, state: {"terminated": terminated}}]},
    }


def test_a_completed_job_with_a_summary_becomes_its_counts() -> None:
    record = summarise_run(
        job(),
        [pod(line(merged=5, archived=4, created=3, conflicts=2, errors=1, message="done"))],
        Task.daily,
    )
    assert record == RunRecord(
        job="daily-1",
        start_time="2026-11-29T03:00:00Z",
        completion_time="2026-11-29T03:01:00Z",
        result=RunResult.succeeded,
        merged=5,
        archived=4,
        created=3,
        conflicts=2,
        errors=1,
        message="done",
    )


def test_a_skipped_run_stays_skipped() -> None:
    record = summarise_run(
        job(), [pod(line(result=RunResult.skipped, message="no LLM"))], Task.daily
    )
    assert record is not None
    assert record.result is RunResult.skipped


def test_a_failed_job_is_failed_with_the_reason_even_with_a_summary() -> None:
    record = summarise_run(job("Failed"), [pod(line(errors=2, message="store down"))], Task.daily)
    assert record is not None
    assert record.result is RunResult.failed
    assert record.errors == 2
    assert record.message.startswith("job failed: DeadlineExceeded: Job was active longer")
    assert record.message.endswith("; store down")
    assert record.completion_time == "2026-11-29T05:00:00Z"


def test_a_failed_job_without_a_pod_says_so() -> None:
    record = summarise_run(job("Failed"), [], Task.daily)
    assert record is not None
    assert record.result is RunResult.failed
    assert "no termination message" in record.message


def test_a_malformed_summary_is_failed_with_the_reason() -> None:
    record = summarise_run(job(), [pod('ENGRAM_SUMMARY {"task": "daily"')], Task.daily)
    assert record is not None
    assert record.result is RunResult.failed
    assert record.message.startswith(
        "job completed but its result is unknown: malformed summary line"
    )


def test_a_message_without_summary_is_failed() -> None:
    record = summarise_run(job(), [pod("Killed")], Task.daily)
    assert record is not None
    assert record.result is RunResult.failed
    assert "no summary line" in record.message


def test_a_summary_of_another_task_is_failed() -> None:
    record = summarise_run(job(), [pod(line(Task.weekly))], Task.daily)
    assert record is not None
    assert record.result is RunResult.failed
    assert "for task 'weekly', not 'daily'" in record.message


def test_the_log_tail_fallback_is_read_up_to_its_last_summary_line() -> None:
    tail = "\n".join(["progress 10%", line(merged=1), "progress 100%", line(merged=2)])
    record = summarise_run(job(), [pod(tail)], Task.daily)
    assert record is not None
    assert record.merged == 2


def test_only_pods_owned_by_the_job_are_read_and_the_newest_first() -> None:
    pods = [
        pod(line(merged=99), owner="another-job", created="2026-11-29T04:00:00Z"),
        pod(line(merged=1), created="2026-11-29T03:00:00Z"),
        pod(line(merged=2), created="2026-11-29T03:30:00Z"),
        pod(line(merged=77), container="sidecar", created="2026-11-29T03:40:00Z"),
    ]
    record = summarise_run(job(), pods, Task.daily)
    assert record is not None
    assert record.merged == 2


def test_a_restarted_containers_last_state_is_read() -> None:
    record = summarise_run(job(), [pod(line(merged=3), state="lastState")], Task.daily)
    assert record is not None
    assert record.merged == 3


def test_a_running_job_is_not_a_run_yet() -> None:
    assert summarise_run(job(None), [pod(line())], Task.daily) is None
    assert job_outcome(job(None)) is None
    pending = job(
        None,
        conditions=[{"type": "Failed", "status": "False"}, {"type": "Suspended", "status": "True"}],
    )
    assert job_outcome(pending) is None


def test_huge_counts_are_clamped_to_what_the_crd_allows() -> None:
    record = summarise_run(job(), [pod(line(merged=10**12))], Task.daily)
    assert record is not None
    assert record.merged == COUNT_MAX


def test_a_long_message_is_cut_to_the_status_limit() -> None:
    record = summarise_run(job("Failed"), [pod(line(message="x" * 1024))], Task.daily)
    assert record is not None
    assert len(record.message) == 1024


def test_history_is_newest_first_bounded_and_one_entry_per_job() -> None:
    def run(name: str, day: int) -> RunRecord:
        return RunRecord(
            job=name, start_time=f"2026-11-0{day}T03:00:00Z", result=RunResult.succeeded
        )

    history = [run("d2", 2), run("d1", 1)]
    history = merge_history(history, run("d3", 3), limit=2)
    assert [r.job for r in history] == ["d3", "d2"]
    # An old run found late does not displace newer ones.
    assert merge_history(history, run("d0", 0), limit=2) == history
    replaced = merge_history(
        history,
        RunRecord(job="d2", start_time="2026-11-02T03:00:00Z", result=RunResult.failed),
        limit=5,
    )
    assert [(r.job, r.result) for r in replaced] == [
        ("d3", RunResult.succeeded),
        ("d2", RunResult.failed),
    ]


def test_history_in_status_is_parsed_and_garbage_is_dropped() -> None:
    status = {"history": [{"job": "a", "result": "Succeeded", "merged": 1}, {"job": "b"}, "junk"]}
    assert parse_history(status) == [RunRecord(job="a", result=RunResult.succeeded, merged=1)]
    assert parse_history({}) == []

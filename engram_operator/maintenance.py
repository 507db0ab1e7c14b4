"""Reconcile EngramMaintenances: one owned CronJob each, and the results of its finished Jobs
copied into ``status.lastRun`` and ``status.history``.

Deleting an EngramMaintenance needs no handler: its CronJob (and the CronJob's Jobs) carry a
controller owner reference, so Kubernetes' garbage collector removes them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from engram_contract.jobs import ENTRYPOINT, job_args
from engram_contract.report import RunResult
from engram_operator.builders import (
    Owner,
    build_cronjob,
    build_cronjob_patch,
    build_maintenance_status,
    build_runs_status,
)
from engram_operator.conditions import Refusal, utc_now
from engram_operator.context import Logger, OperatorContext
from engram_operator.drift import matches
from engram_operator.events import announce, post_event
from engram_operator.kube import CRONJOBS, ENGRAM_MAINTENANCES, JOBS, PODS, Conflict, KubeError
from engram_operator.models import MaintenanceSpec, SpecError, parse_maintenance_spec
from engram_operator.naming import LABEL_INSTANCE, LABEL_MAINTENANCE, cronjob_name
from engram_operator.ownership import belongs_to
from engram_operator.runs import job_outcome, merge_history, parse_history, summarise_run

# Set by the Job controller on every pod of a Job; unique per Job, unlike the Job's name.
POD_JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
# Ready reason of an EngramMaintenance outside the namespace where the job env lives.
WRONG_NAMESPACE = "WrongNamespace"


def snapshot_maintenance(body: Mapping[str, Any]) -> dict[None, dict[str, Any]]:
    """The index entry for one EngramMaintenance: a copy of its body, for the resync."""
    return {None: copy.deepcopy(dict(body))}


async def reconcile_maintenance(
    ctx: OperatorContext, body: Mapping[str, Any], logger: Logger
) -> Refusal | None:
    """Create or repair the CronJob and write the Ready status when it changed.

    Returns why the resource is not Ready (invalid spec, a foreign CronJob in the way, the API
    server refusing the CronJob), or None when it is. Every refusal is in the status first,
    with the server's reason and the generation it applies to.
    """
    owner = Owner.from_body(body)
    meta = body.get("metadata") or {}
    generation = meta.get("generation")
    previous = body.get("status") or {}

    async def report(ready: bool, reason: str, message: str, cronjob: str | None) -> None:
        desired = build_maintenance_status(
            ready=ready,
            reason=reason,
            message=message,
            cronjob=cronjob,
            generation=generation if isinstance(generation, int) else None,
            previous=previous,
            now=utc_now(),
        )
        if matches(desired, previous):
            return
        try:
            await ctx.api.patch(
                ENGRAM_MAINTENANCES,
                owner.namespace,
                owner.name,
                {"status": desired},
                subresource="status",
            )
        except KubeError as exc:
            logger.warning("Could not write the status of %s: %s", owner.name, exc.describe())
            return
        before = [
            (cond.get("status"), cond.get("reason")) for cond in previous.get("conditions") or []
        ]
        if before != [("True" if ready else "False", reason)]:
            announce(owner.as_body(), reason=reason, message=message, warning=not ready)

    if owner.namespace != ctx.settings.job_namespace:
        problem = (
            f"EngramMaintenance must be in namespace {ctx.settings.job_namespace}, where the "
            "maintenance pods' env ConfigMap and Secrets are (ENGRAM_OPERATOR_JOB_NAMESPACE); "
            f"no CronJob is scheduled in {owner.namespace}"
        )
        await report(False, WRONG_NAMESPACE, problem, None)
        return Refusal(problem)

    try:
        spec = parse_maintenance_spec(body.get("spec") or {}, resource_name=owner.name)
    except SpecError as exc:
        await report(False, "InvalidSpec", str(exc), None)
        return Refusal(str(exc))

    desired = build_cronjob(owner=owner, spec=spec, settings=ctx.settings)
    name = desired["metadata"]["name"]
    ref = f"{owner.namespace}/{name}"
    try:
        conflict = await _ensure_cronjob(ctx, owner, desired, logger)
    except KubeError as exc:
        message = f"the API server refused CronJob {ref}: {exc.describe()}"
        await report(False, exc.reason or "CronJobRefused", message, None)
        return Refusal(message, permanent=exc.permanent)
    if conflict is not None:
        await report(False, "CronJobConflict", conflict, None)
        return Refusal(conflict)

    await report(True, "Suspended" if spec.suspend else "Scheduled", _describe(spec, ref), name)
    return None


async def _ensure_cronjob(
    ctx: OperatorContext, owner: Owner, desired: dict[str, Any], logger: Logger
) -> str | None:
    """Create or patch the CronJob; returns a problem when a foreign one is in the way."""
    name = desired["metadata"]["name"]
    ref = f"{owner.namespace}/{name}"
    current = await ctx.api.get(CRONJOBS, owner.namespace, name)
    if current is None:
        try:
            await ctx.api.create(CRONJOBS, owner.namespace, desired)
        except Conflict:
            current = await ctx.api.get(CRONJOBS, owner.namespace, name)
            if current is None:
                raise
        else:
            logger.info("Created CronJob %s.", ref)
            return None
    if not owner.owns(current):
        return f"CronJob {ref} exists and is not owned by this EngramMaintenance"
    patch = build_cronjob_patch(desired)
    if not matches(patch, current):
        await ctx.api.patch(CRONJOBS, owner.namespace, name, patch)
        logger.info("Updated CronJob %s.", ref)
    return None


def _describe(spec: MaintenanceSpec, ref: str) -> str:
    command = " ".join([ENTRYPOINT, *job_args(spec.task, dry_run=spec.dry_run)])
    if spec.retention is not None:
        command += f" (keeping {spec.retention.keep})"
    if spec.suspend:
        return f"CronJob {ref} is suspended ({command})"
    return f"CronJob {ref} runs `{command}` on '{spec.schedule}' ({spec.time_zone or 'UTC'})"


def _made_by(job: Mapping[str, Any], cronjob: str) -> bool:
    refs = (job.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("kind") == "CronJob" and ref.get("name") == cronjob for ref in refs)


async def record_job(ctx: OperatorContext, job: Mapping[str, Any], logger: Logger) -> None:
    """Copy a finished Job's result into its EngramMaintenance's status. Never raises: a run
    that cannot be read is recorded as Failed, and an API error is logged and retried by the
    next resync."""
    meta = job.get("metadata") or {}
    ref = f"{meta.get('namespace')}/{meta.get('name')}"
    try:
        await _record_job(ctx, job, logger)
    except Exception:
        logger.exception("Could not record the result of Job %s.", ref)


async def _record_job(ctx: OperatorContext, job: Mapping[str, Any], logger: Logger) -> None:
    if job_outcome(job) is None:
        return
    meta = job.get("metadata") or {}
    namespace = str(meta.get("namespace", ""))
    job_name = str(meta.get("name", ""))
    labels = meta.get("labels") or {}
    owner_name = labels.get(LABEL_MAINTENANCE)
    # Label selectors are a server-side filter we do not rely on alone.
    if not owner_name or labels.get(LABEL_INSTANCE) != ctx.settings.release:
        return
    if namespace != ctx.settings.job_namespace:
        return
    async with ctx.runs_lock:
        maintenance = await ctx.api.get(ENGRAM_MAINTENANCES, namespace, owner_name)
        if maintenance is None or not belongs_to(
            maintenance,
            release_namespace=ctx.settings.release_namespace,
            release=ctx.settings.release,
        ):
            return
        try:
            spec = parse_maintenance_spec(maintenance.get("spec") or {}, resource_name=owner_name)
        except SpecError:
            return
        if not _made_by(job, cronjob_name(owner_name)):
            logger.warning(
                "Job %s/%s is labelled for %s but was not made by its CronJob; ignored.",
                namespace,
                job_name,
                owner_name,
            )
            return
        history = parse_history(maintenance.get("status") or {})
        if any(record.job == job_name for record in history):
            return
        pods = await ctx.api.list_objects(
            PODS, namespace, label_selector=f"{POD_JOB_UID_LABEL}={meta.get('uid', '')}"
        )
        record = summarise_run(job, pods, spec.task)
        if record is None:
            return
        updated = merge_history(history, record, spec.history_limit)
        if updated == history:
            return  # older than everything kept
        await ctx.api.patch(
            ENGRAM_MAINTENANCES,
            namespace,
            owner_name,
            {"status": build_runs_status(updated)},
            subresource="status",
        )
        summary = (
            f"Job {job_name}: {record.result.value}; merged {record.merged}, archived "
            f"{record.archived}, created {record.created}, conflicts {record.conflicts}, "
            f"errors {record.errors}" + (f"; {record.message}" if record.message else "")
        )
        logger.info("Recorded for %s/%s: %s", namespace, owner_name, summary)
        await post_event(
            ctx.api,
            maintenance,
            reason=f"Run{record.result.value}",
            message=summary,
            warning=record.result is RunResult.failed,
        )


async def collect_runs(ctx: OperatorContext, body: Mapping[str, Any], logger: Logger) -> None:
    """Record any finished Job of this resource that the Job watch missed (operator downtime)."""
    owner = Owner.from_body(body)
    if owner.namespace != ctx.settings.job_namespace:
        return  # never scheduled there (and the operator has no Job rights there)
    jobs = await ctx.api.list_objects(
        JOBS,
        owner.namespace,
        label_selector=f"{LABEL_INSTANCE}={ctx.settings.release},{LABEL_MAINTENANCE}={owner.name}",
    )
    for job in jobs:
        # Label selectors are a server-side filter we do not rely on.
        if ((job.get("metadata") or {}).get("labels") or {}).get(LABEL_MAINTENANCE) == owner.name:
            await record_job(ctx, job, logger)

"""The operator needs every RBAC grant it declares, and nothing else (recorded against kmock):
group, resource and verb, and the namespace and name each request touches."""

from __future__ import annotations

from typing import Any

from engram_contract.report import MaintenanceSummary, RunResult, Task
from engram_operator import rbac
from engram_operator.kube import CONFIGMAPS, CRONJOBS, ENGRAM_AGENTS, ENGRAM_MAINTENANCES, SECRETS
from tests.engram_operator.kopf_harness import (
    OPERATOR_NS,
    Cluster,
    StartOperator,
    eventually,
    make_settings,
    permission_of,
    run_job,
)


def _agent(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("identity", {"token": {"enabled": True}})
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramAgent",
        "metadata": {"name": name},
        "spec": spec,
    }


async def _exists(cluster: Cluster, kind: Any, ns: str, name: str, check: Any = bool) -> Any:
    async def probe() -> Any:
        obj = await cluster.get(kind, ns, name)
        return obj if obj is not None and check(obj) else None

    return await eventually(probe, what=f"{kind.plural} {ns}/{name}")


def _covered(declared: rbac.Permission, used: set[rbac.Permission]) -> bool:
    ns, group, resource, verb, name = declared
    return any(
        (u_ns, u_group, u_resource, u_verb) == (ns, group, resource, verb)
        and (name is None or u_name == name)
        for u_ns, u_group, u_resource, u_verb, u_name in used
    )


async def test_every_rbac_grant_is_used_and_every_call_is_allowed(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    # The default: the release namespace only.
    settings = make_settings(resync_seconds=0.2, namespaces="")
    cluster.enforce(rbac.grants_for(settings))
    await start_operator(settings)
    ns = OPERATOR_NS

    # Agents: create (Secret, ConfigMap, status), change (ConfigMap patch), an emptied token
    # (Secret patch on resync), an invalid spec (an event), delete (Secret delete, finalizer).
    await cluster.create(ENGRAM_AGENTS, ns, _agent("main", read=["global"]))
    await _exists(cluster, SECRETS, ns, "main-engram-token")
    await cluster.patch(ENGRAM_AGENTS, ns, "main", {"spec": {"read": ["global", "dm"]}})
    await _exists(cluster, CONFIGMAPS, ns, "engram-permissions", lambda cm: "- dm" in str(cm))
    await cluster.patch(SECRETS, ns, "main-engram-token", {"data": {"token": None}})
    await _exists(cluster, SECRETS, ns, "main-engram-token", lambda s: "token" in s.get("data", {}))
    await cluster.create(ENGRAM_AGENTS, ns, _agent("broken", write=["group:"]))
    await _exists(cluster, ENGRAM_AGENTS, ns, "broken", lambda o: o.get("status"))
    await cluster.delete(ENGRAM_AGENTS, ns, "main")
    await eventually(lambda: _gone(cluster, ns), what="main deleted")

    # Maintenance: create (CronJob, status), change (CronJob patch), a finished Job (Job watch,
    # the owner's get, pods list, status patch), and a resync round (Jobs list).
    await cluster.create(
        ENGRAM_MAINTENANCES,
        ns,
        {
            "apiVersion": "engram.dev/v1alpha1",
            "kind": "EngramMaintenance",
            "metadata": {"name": "daily"},
            "spec": {"task": "daily", "schedule": "0 3 * * *"},
        },
    )
    await _exists(cluster, CRONJOBS, ns, "daily")
    await cluster.patch(ENGRAM_MAINTENANCES, ns, "daily", {"spec": {"schedule": "0 2 * * *"}})
    await _exists(cluster, CRONJOBS, ns, "daily", lambda c: c["spec"]["schedule"] == "0 2 * * *")
    summary = MaintenanceSummary(
        task=Task.daily,
        result=RunResult.succeeded,
        started_at="2026-11-29T02:00:00Z",
        finished_at="2026-11-29T02:01:00Z",
        elapsed_s=60,
    )
    await run_job(cluster, ns, "daily", "daily-1", message=summary.to_line())
    await _exists(cluster, ENGRAM_MAINTENANCES, ns, "daily", lambda o: o["status"].get("lastRun"))
    jobs_listed = len(
        [r for r in cluster.operator_requests() if permission_of(r) == _jobs_list(ns)]
    )
    await eventually(
        lambda: _more_job_lists(cluster, ns, jobs_listed), what="a resync round listing Jobs"
    )

    used = cluster.used_permissions()
    declared = rbac.permissions(rbac.grants_for(settings))
    assert sorted((p for p in used if not rbac.allows(declared, p)), key=str) == [], (
        "calls the grants do not allow"
    )
    assert sorted((p for p in declared if not _covered(p, used)), key=str) == [], (
        "grants the operator never needed"
    )


def _jobs_list(ns: str) -> rbac.Permission:
    return (ns, "batch", "jobs", "list", None)


async def _gone(cluster: Cluster, ns: str) -> bool:
    return await cluster.get(ENGRAM_AGENTS, ns, "main") is None


async def _more_job_lists(cluster: Cluster, ns: str, before: int) -> bool:
    listed = [r for r in cluster.operator_requests() if permission_of(r) == _jobs_list(ns)]
    return len(listed) > before

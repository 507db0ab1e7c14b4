"""Several releases on one cluster, and an API server that says no (kmock).

Two operators share namespaces and never act on each other's resources; refusals by the API
server (a 422 on a CronJob, a 403 on a Secret) end up as Ready=False conditions with the
server's reason, one resource's refusal never stops the others, and a permanent refusal is
not retried in a tight loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engram_contract.permissions import CONFIGMAP_KEY, PermissionConfig, load_permission_config
from engram_operator import rbac
from engram_operator.kube import CONFIGMAPS, CRONJOBS, ENGRAM_AGENTS, ENGRAM_MAINTENANCES, SECRETS
from engram_operator.naming import finalizer
from engram_operator.ownership import belongs_to
from engram_operator.uninstall import uninstall
from tests.engram_operator.kopf_harness import (
    HOOK_TOKEN,
    OPERATOR_NS,
    Cluster,
    Rejection,
    StartOperator,
    eventually,
    make_settings,
    permission_of,
)

pytestmark = pytest.mark.usefixtures("cluster")
SHARED = "team-a"
INVALID_TZ = (
    'CronJob.batch "engram-daily" is invalid: spec.timeZone: Invalid value: "Europe/Pari": '
    "unknown time zone Europe/Pari"
)


def agent(name: str, release: str | None, **spec: Any) -> dict[str, Any]:
    spec.setdefault("identity", {"token": {"enabled": True}})
    spec.setdefault("read", ["global"])
    if release is not None:
        spec["release"] = release
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramAgent",
        "metadata": {"name": name},
        "spec": spec,
    }


def maintenance(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("task", "daily")
    spec.setdefault("schedule", "0 3 * * *")
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramMaintenance",
        "metadata": {"name": name},
        "spec": spec,
    }


def ready(obj: dict[str, Any] | None) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == "Ready":
            return dict(cond)
    return {}


async def where(cluster: Cluster, kind: Any, ns: str, name: str, check: Any, what: str) -> Any:
    async def probe() -> Any:
        obj = await cluster.get(kind, ns, name)
        return obj if obj is not None and check(obj) else None

    return await eventually(probe, what=what)


async def config_of(cluster: Cluster, ns: str) -> PermissionConfig | None:
    cm = await cluster.get(CONFIGMAPS, ns, "engram-permissions")
    return None if cm is None else load_permission_config(cm["data"][CONFIGMAP_KEY])


def test_a_resource_belongs_to_the_release_it_names_or_to_the_one_in_its_namespace() -> None:
    def body(ns: str, release: str | None) -> dict[str, Any]:
        return {"metadata": {"namespace": ns}, "spec": {"release": release} if release else {}}

    prod = {"release_namespace": "prod", "release": "engram"}
    assert belongs_to(body("prod", None), **prod)
    assert belongs_to(body("prod", "engram"), **prod)
    assert belongs_to(body("team-a", "prod/engram"), **prod)
    assert not belongs_to(body("team-a", None), **prod)
    assert not belongs_to(body("team-a", "engram"), **prod)  # "engram" in team-a
    assert not belongs_to(body("team-a", "staging/engram"), **prod)
    assert not belongs_to(body("prod", "engram-canary"), **prod)


async def test_two_releases_sharing_a_namespace_never_act_on_each_others_resources(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    # Both watch every namespace: the set-up where two releases used to fight.
    prod_settings = make_settings(configmap_namespace="prod", watch_all=True)
    staging_settings = make_settings(configmap_namespace="staging", watch_all=True)
    await start_operator(prod_settings, token="prod")
    await start_operator(staging_settings, token="staging")

    await cluster.create(ENGRAM_AGENTS, SHARED, agent("builder", "prod/engram"))
    await cluster.create(ENGRAM_AGENTS, SHARED, agent("tester", "staging/engram"))
    await cluster.create(ENGRAM_MAINTENANCES, "prod", maintenance("engram-daily"))
    await cluster.create(ENGRAM_MAINTENANCES, "staging", maintenance("engram-daily"))

    async def both_folded() -> tuple[PermissionConfig, PermissionConfig] | None:
        prod, staging = await config_of(cluster, "prod"), await config_of(cluster, "staging")
        if not (prod and staging and "builder" in prod.agents and "tester" in staging.agents):
            return None
        if prod.agents["builder"].token_sha256 and staging.agents["tester"].token_sha256:
            return prod, staging
        return None

    prod, staging = await eventually(both_folded, what="each release folded its agent")
    # A staging token never authenticates to prod, nor the other way round.
    assert set(prod.agents) == {"builder"}
    assert set(staging.agents) == {"tester"}
    assert not set(prod.agents["builder"].token_sha256) & set(staging.agents["tester"].token_sha256)
    for ns in ("prod", "staging"):
        obj = await where(
            cluster,
            ENGRAM_MAINTENANCES,
            ns,
            "engram-daily",
            lambda o: ready(o).get("reason") == "Scheduled",
            f"{ns} scheduled",
        )
        assert obj["status"]["cronJob"] == "engram-daily"

    # Let a few more events pass (status patches, kopf's annotations), then count who touched
    # what: each operator only ever wrote its own release's objects.
    await cluster.patch(ENGRAM_AGENTS, SHARED, "builder", {"spec": {"read": ["global", "dm"]}})
    await eventually(
        lambda: _has_read(cluster, "prod", "builder", "dm"), what="prod refolded builder"
    )
    for token, theirs in (("prod", "tester"), ("staging", "builder")):
        writes = [
            req.url.path
            for req in cluster.requests_by(token)
            if req.method.value.upper() in ("POST", "PATCH", "PUT", "DELETE")
        ]
        assert writes, token
        foreign = [
            (req.url.path, req.data)
            for req in cluster.requests_by(token)
            if req.method.value.upper() in ("POST", "PATCH", "PUT", "DELETE")
            and f"/{theirs}" in req.url.path
        ]
        assert not foreign, f"{token} wrote {theirs}"
        other_ns = "staging" if token == "prod" else "prod"
        assert not [p for p in writes if f"/namespaces/{other_ns}/" in p], (
            f"{token} wrote into {other_ns}"
        )
    # prod's CronJob was written by prod alone (no suspend flip-flop).
    cronjob_writes = [
        req for req in cluster.operator_requests() if "/namespaces/prod/cronjobs" in req.url.path
    ]
    assert cronjob_writes
    assert all(req.headers.get("Authorization") == "Bearer prod" for req in cronjob_writes)
    cronjob = await cluster.get(CRONJOBS, "prod", "engram-daily")
    assert cronjob["spec"]["suspend"] is False
    assert cronjob["spec"]["jobTemplate"]["metadata"]["labels"]["app.kubernetes.io/instance"] == (
        "engram"
    )


async def _has_read(cluster: Cluster, ns: str, name: str, scope: str) -> bool:
    config = await config_of(cluster, ns)
    return config is not None and name in config.agents and scope in config.agents[name].read


async def test_an_agent_without_a_release_outside_the_release_namespace_is_left_alone(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(ENGRAM_AGENTS, SHARED, agent("stray", None))
    await cluster.create(ENGRAM_AGENTS, OPERATOR_NS, agent("home", None))
    config = await eventually(
        lambda: _folded(cluster, "home"), what="the release-namespace agent folded"
    )
    assert "stray" not in config.agents
    stray = await cluster.get(ENGRAM_AGENTS, SHARED, "stray")
    assert not stray.get("status")
    assert not stray["metadata"].get("finalizers")
    assert await cluster.get(SECRETS, SHARED, "stray-engram-token") is None


async def _folded(cluster: Cluster, name: str) -> PermissionConfig | None:
    config = await config_of(cluster, OPERATOR_NS)
    return config if config is not None and name in config.agents else None


async def test_a_cronjob_the_api_server_rejects_sets_ready_false_with_its_reason(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    # Europe/Pari passes the CRD's pattern; only the API server knows it is no time zone.
    cluster.reject(
        Rejection(
            "POST",
            f"/namespaces/{OPERATOR_NS}/cronjobs",
            422,
            "Invalid",
            INVALID_TZ,
            '"Europe/Pari"',
        )
    )
    await start_operator(make_settings(resync_seconds=0.2))
    await cluster.create(
        ENGRAM_MAINTENANCES, OPERATOR_NS, maintenance("engram-daily", timeZone="Europe/Pari")
    )
    obj = await where(
        cluster,
        ENGRAM_MAINTENANCES,
        OPERATOR_NS,
        "engram-daily",
        lambda o: ready(o).get("status") == "False",
        "Ready=False",
    )
    condition = ready(obj)
    assert condition["reason"] == "Invalid"
    assert "unknown time zone Europe/Pari" in condition["message"]
    assert condition["observedGeneration"] == 1
    assert obj["status"]["observedGeneration"] == 1
    assert obj["status"].get("cronJob") is None

    # Permanent: not retried in a tight loop. Over ~1 s only the resync (every 0.2 s) tries.
    def creates() -> int:
        return len(
            [
                r
                for r in cluster.operator_requests()
                if r.method.value.upper() == "POST" and r.url.path.endswith("/cronjobs")
            ]
        )

    before = creates()
    await asyncio.sleep(1.0)  # a bound on the retry rate needs a window, not a condition
    assert creates() - before <= 8

    # Fixing the spec fixes the status, with the new generation.
    await cluster.patch(
        ENGRAM_MAINTENANCES, OPERATOR_NS, "engram-daily", {"spec": {"timeZone": "Europe/Paris"}}
    )
    obj = await where(
        cluster,
        ENGRAM_MAINTENANCES,
        OPERATOR_NS,
        "engram-daily",
        lambda o: ready(o).get("status") == "True",
        "Ready after the fix",
    )
    assert ready(obj)["observedGeneration"] == 2
    assert (await cluster.get(CRONJOBS, OPERATOR_NS, "engram-daily"))["spec"]["timeZone"] == (
        "Europe/Paris"
    )


async def test_a_rejected_cronjob_update_is_not_ready_at_the_current_generation(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(ENGRAM_MAINTENANCES, OPERATOR_NS, maintenance("engram-daily"))
    await where(
        cluster,
        ENGRAM_MAINTENANCES,
        OPERATOR_NS,
        "engram-daily",
        lambda o: ready(o).get("status") == "True",
        "Ready",
    )
    limit = (
        'CronJob.batch "engram-daily" is forbidden: maximum memory usage per Container is 4Gi, '
        "but limit is 64Gi"
    )
    cluster.reject(Rejection("PATCH", "/cronjobs/engram-daily", 403, "Forbidden", limit, "64Gi"))
    await cluster.patch(
        ENGRAM_MAINTENANCES,
        OPERATOR_NS,
        "engram-daily",
        {"spec": {"resources": {"limits": {"memory": "64Gi"}}}},
    )
    obj = await where(
        cluster,
        ENGRAM_MAINTENANCES,
        OPERATOR_NS,
        "engram-daily",
        lambda o: ready(o).get("status") == "False",
        "Ready=False after the rejected update",
    )
    condition = ready(obj)
    assert condition["reason"] == "Forbidden"
    assert "maximum memory usage per Container is 4Gi" in condition["message"]
    assert condition["observedGeneration"] == 2
    assert obj["status"]["observedGeneration"] == 2


async def test_the_resync_repairs_each_maintenance_even_when_another_is_rejected(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(resync_seconds=0.2))
    await cluster.create(ENGRAM_MAINTENANCES, OPERATOR_NS, maintenance("aaa-daily"))
    await cluster.create(ENGRAM_MAINTENANCES, OPERATOR_NS, maintenance("zzz-weekly", task="weekly"))
    for name in ("aaa-daily", "zzz-weekly"):
        await where(cluster, CRONJOBS, OPERATOR_NS, name, bool, f"CronJob {name}")

    # From now on every write to aaa-daily's CronJob is refused; zzz-weekly's is deleted.
    cluster.reject(
        Rejection("POST", "/cronjobs", 422, "Invalid", "aaa-daily is invalid", "aaa-daily")
    )
    cluster.reject(
        Rejection("PATCH", "/cronjobs/aaa-daily", 422, "Invalid", "aaa-daily is invalid")
    )
    await cluster.patch(CRONJOBS, OPERATOR_NS, "aaa-daily", {"spec": {"schedule": "1 1 1 1 1"}})
    await cluster.delete(CRONJOBS, OPERATOR_NS, "zzz-weekly")

    await where(cluster, CRONJOBS, OPERATOR_NS, "zzz-weekly", bool, "zzz-weekly recreated")
    obj = await where(
        cluster,
        ENGRAM_MAINTENANCES,
        OPERATOR_NS,
        "aaa-daily",
        lambda o: ready(o).get("reason") == "Invalid",
        "aaa-daily Ready=False",
    )
    assert "aaa-daily is invalid" in ready(obj)["message"]


async def test_one_agent_whose_secret_is_refused_does_not_hold_up_the_others(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(resync_seconds=0.2))
    await cluster.create(ENGRAM_AGENTS, "team-b", agent("aaa-doomed", "engram/engram"))
    await cluster.create(ENGRAM_AGENTS, SHARED, agent("zzz-fine", "engram/engram"))
    await where(cluster, SECRETS, SHARED, "zzz-fine-engram-token", bool, "zzz-fine's token")
    await where(cluster, SECRETS, "team-b", "aaa-doomed-engram-token", bool, "aaa's token")

    # team-b is being deleted: every Secret call there is refused from now on.
    terminating = (
        'secrets "aaa-doomed-engram-token" is forbidden: unable to create new content in '
        "namespace team-b because it is being terminated"
    )
    for method in ("GET", "POST", "PATCH", "DELETE"):
        cluster.reject(
            Rejection(method, "/namespaces/team-b/secrets", 403, "Forbidden", terminating)
        )
        cluster.reject(
            Rejection(
                method,
                "/namespaces/team-b/secrets/aaa-doomed-engram-token",
                403,
                "Forbidden",
                terminating,
            )
        )
    # zzz-fine's Secret vanishes: the resync must still recreate it.
    await cluster.delete(SECRETS, SHARED, "zzz-fine-engram-token")
    await where(cluster, SECRETS, SHARED, "zzz-fine-engram-token", bool, "zzz-fine's token back")
    obj = await where(
        cluster,
        ENGRAM_AGENTS,
        "team-b",
        "aaa-doomed",
        lambda o: ready(o).get("reason") == "Forbidden",
        "aaa-doomed Ready=False",
    )
    assert "being terminated" in ready(obj)["message"]
    config = await eventually(lambda: _folded(cluster, "zzz-fine"), what="zzz-fine folded")
    assert config.agents["zzz-fine"].token_sha256


async def test_watching_all_namespaces_makes_tokens_only_where_a_role_allows_secrets(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    settings = make_settings(watch_all=True, namespaces="team-a")
    cluster.enforce(rbac.grants_for(settings))
    await start_operator(settings)
    await cluster.create(ENGRAM_AGENTS, "team-z", agent("tokened", "engram/engram"))
    await cluster.create(
        ENGRAM_AGENTS,
        "team-z",
        agent(
            "bound",
            "engram/engram",
            identity={"serviceAccounts": [{"namespace": "team-z", "name": "bot"}]},
        ),
    )
    obj = await where(
        cluster,
        ENGRAM_AGENTS,
        "team-z",
        "tokened",
        lambda o: ready(o).get("reason") == "Forbidden",
        "Forbidden in its status",
    )
    assert 'cannot get resource "secrets"' in ready(obj)["message"]
    assert 'in the namespace "team-z"' in ready(obj)["message"]
    bound = await where(
        cluster,
        ENGRAM_AGENTS,
        "team-z",
        "bound",
        lambda o: ready(o).get("status") == "True",
        "the ServiceAccount-bound agent Ready",
    )
    assert bound["status"]["agentName"] == "bound"
    config = await eventually(lambda: _folded(cluster, "bound"), what="bound folded")
    # Declared, but with no token anyone could present.
    assert config.agents["tokened"].token_sha256 == []


async def test_the_job_watch_asks_for_this_releases_jobs_in_the_release_namespace_only(
    cluster: Cluster, operator: Any
) -> None:
    watches = [
        req
        for req in cluster.operator_requests()
        if req.resource is not None and req.resource.plural == "jobs"
    ]
    assert watches
    for req in watches:
        assert req.namespace == OPERATOR_NS
        selector = req.params.get("labelSelector", "")
        assert "app.kubernetes.io/instance=engram" in selector
        assert "app.kubernetes.io/managed-by=engram-operator" in selector


async def test_uninstall_deletes_this_releases_resources_and_waits_for_the_operator(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(ENGRAM_AGENTS, SHARED, agent("mine", "engram/engram"))
    await cluster.create(ENGRAM_AGENTS, SHARED, agent("theirs", "staging/engram"))
    await cluster.create(ENGRAM_MAINTENANCES, OPERATOR_NS, maintenance("engram-daily"))
    await where(cluster, SECRETS, SHARED, "mine-engram-token", bool, "mine's token")
    mine = await where(
        cluster,
        ENGRAM_AGENTS,
        SHARED,
        "mine",
        lambda o: o["metadata"].get("finalizers"),
        "mine's finalizer",
    )
    assert mine["metadata"]["finalizers"] == [finalizer("engram", OPERATOR_NS)]

    api = cluster.hook_api()
    try:
        outcome = await uninstall(api, operator.settings, wait_s=10)
    finally:
        await api.close()
    hook_grants = rbac.permissions(rbac.uninstall_grants(operator.settings))
    hook_calls = [permission_of(r) for r in cluster.requests_by(HOOK_TOKEN)]
    assert hook_calls
    assert [p for p in hook_calls if p is None or not rbac.allows(hook_grants, p)] == []
    assert sorted(outcome.deleted) == [
        f"engramagents/{SHARED}/mine",
        f"engrammaintenances/{OPERATOR_NS}/engram-daily",
    ]
    # The operator let them go itself (its delete handler ran): nothing was forced.
    assert outcome.released == []
    assert outcome.failed == []
    assert await cluster.get(ENGRAM_AGENTS, SHARED, "mine") is None
    assert await cluster.get(SECRETS, SHARED, "mine-engram-token") is None
    assert await cluster.get(ENGRAM_MAINTENANCES, OPERATOR_NS, "engram-daily") is None
    # Another release's resource is never touched.
    assert await cluster.get(ENGRAM_AGENTS, SHARED, "theirs") is not None


async def test_uninstall_releases_finalizers_the_operator_no_longer_removes(
    cluster: Cluster,
) -> None:
    # Left by an operator that is gone; another finalizer on it is kept.
    ours, legacy = finalizer("engram", OPERATOR_NS), "engram.dev/finalizer"
    body = agent("orphan", "engram/engram")
    body["metadata"]["finalizers"] = [ours, legacy, "example.com/keep"]
    await cluster.create(ENGRAM_AGENTS, SHARED, body)
    api = cluster.hook_api()
    try:
        outcome = await uninstall(api, make_settings(), wait_s=0.2)
    finally:
        await api.close()
    assert outcome.deleted == [f"engramagents/{SHARED}/orphan"]
    assert outcome.released == [f"engramagents/{SHARED}/orphan"]
    left = await cluster.get(ENGRAM_AGENTS, SHARED, "orphan")
    assert left["metadata"]["finalizers"] == ["example.com/keep"]


async def test_the_finalizer_older_releases_shared_is_swapped_for_this_releases_own(
    cluster: Cluster, operator: Any
) -> None:
    body = agent("veteran", "engram/engram")
    body["metadata"]["finalizers"] = ["engram.dev/finalizer"]
    await cluster.create(ENGRAM_AGENTS, SHARED, body)
    obj = await where(
        cluster,
        ENGRAM_AGENTS,
        SHARED,
        "veteran",
        lambda o: o["metadata"].get("finalizers") == [finalizer("engram", OPERATOR_NS)],
        "only this release's finalizer",
    )
    assert obj["metadata"]["name"] == "veteran"
    await where(
        cluster,
        ENGRAM_AGENTS,
        SHARED,
        "veteran",
        lambda o: ready(o).get("status") == "True",
        "still served",
    )

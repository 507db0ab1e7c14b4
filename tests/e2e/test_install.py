"""One `helm install` gives a working Engram: agents get tokens and memories, maintenance reports.

Opt-in (marker e2e, needs ``--kube-context``); it cannot run in this repository's CI, so it was
kept correct by reading. The tests share one installed release and run in file order.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .cluster import CHART_DIR, Cluster, Release, condition_true

pytestmark = pytest.mark.e2e

AGENT = "e2e-writer"
AGENT_SCOPE = "group:e2e"


def test_helm_test_passes_on_a_fresh_install(release: Release, timeout_s: int) -> None:
    result = release.helm.test(release.name, timeout=timeout_s, logs=True)
    assert "tools/list names" in json.dumps(result), result


def _agent_manifest(namespace: str) -> dict[str, Any]:
    # Fields per manifests/crds/engramagents.engram.dev.yaml.
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramAgent",
        "metadata": {"name": AGENT, "namespace": namespace},
        "spec": {
            "read": ["global", AGENT_SCOPE],
            "write": [AGENT_SCOPE],
            "types": ["fact", "lesson"],
            "operations": ["add", "search"],
            "maxTrust": "medium",
            "identity": {"token": {"enabled": True}},
        },
    }


def _ready_agent(cluster: Cluster, namespace: str) -> dict[str, Any] | None:
    agent = cluster.get("-n", namespace, "engramagent", AGENT)
    token_secret = agent.get("status", {}).get("tokenSecret", {})
    return agent if condition_true(agent) and token_secret.get("name") else None


def _token(cluster: Cluster, namespace: str, agent: dict[str, Any]) -> str:
    where = agent["status"]["tokenSecret"]
    secret = cluster.get("-n", namespace, "secret", where["name"])
    return base64.b64decode(secret["data"][where.get("key") or "token"]).decode().strip()


async def _remember_and_recall(url: str, token: str, content: str) -> tuple[Any, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        added = await client.call_tool(
            "mem0_add", {"content": content, "scope": AGENT_SCOPE, "mem_type": "fact"}
        )
        found = await client.call_tool("mem0_search", {"query": content, "scope": AGENT_SCOPE})
    return added, found


def test_an_agent_token_from_the_operator_stores_and_recalls_a_memory(
    release: Release, cluster: Cluster
) -> None:
    cluster.apply(_agent_manifest(release.namespace))
    agent = cluster.wait_for(
        "EngramAgent Ready with a token Secret", lambda: _ready_agent(cluster, release.namespace)
    )
    token = _token(cluster, release.namespace, agent)
    content = f"The e2e build server is named hopper-{uuid.uuid4().hex[:6]}"

    with cluster.port_forward(release.namespace, f"svc/{release.name}", 8765) as url:

        def attempt() -> tuple[Any, Any] | None:
            # The token's hash reaches the service through a ConfigMap volume (a kubelet sync
            # away), so the first calls may be refused: any failure means "not yet".
            try:
                return asyncio.run(_remember_and_recall(url, token, content))
            except Exception:
                return None

        added, found = cluster.wait_for("the agent token to be accepted", attempt, timeout_s=180)
    assert not added.isError, added
    assert not found.isError, found
    assert content in json.dumps(found.model_dump(mode="json")), found


def _cronjob_of(cluster: Cluster, namespace: str, owner: str) -> str | None:
    status = cluster.get("-n", namespace, "engrammaintenance", owner).get("status", {})
    name: str | None = status.get("cronJob") or None
    return name


def test_a_maintenance_job_reports_its_result_on_the_engrammaintenance(
    release: Release, cluster: Cluster
) -> None:
    owner = f"{release.name}-daily"
    cronjob = cluster.wait_for(
        "the daily CronJob", lambda: _cronjob_of(cluster, release.namespace, owner)
    )
    job = f"e2e-daily-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("-n", release.namespace, "create", "job", job, f"--from=cronjob/{cronjob}")
    cluster.kubectl(
        "-n", release.namespace, "wait", f"job/{job}", "--for=condition=Complete", "--timeout=600s"
    )

    def last_run() -> dict[str, Any] | None:
        status = cluster.get("-n", release.namespace, "engrammaintenance", owner).get("status", {})
        run: dict[str, Any] | None = status.get("lastRun")
        return run if run and run.get("result") else None

    run = cluster.wait_for("status.lastRun of the daily EngramMaintenance", last_run)
    assert run["result"] == "Succeeded", run
    table = cluster.kubectl("-n", release.namespace, "get", "engrammaintenance", owner).stdout
    assert "Succeeded" in table, table


def test_upgrade_keeps_the_generated_qdrant_api_key(release: Release, cluster: Cluster) -> None:
    secret = f"{release.name}-qdrant"
    before = cluster.get("-n", release.namespace, "secret", secret)["data"]
    values = {**release.values, "logLevel": "DEBUG"}
    release.helm.upgrade(
        CHART_DIR,
        release.name,
        values,
        namespace=release.namespace,
        wait="watcher",
        timeout=cluster.timeout_s,
    )
    after = cluster.get("-n", release.namespace, "secret", secret)["data"]
    assert after == before
    cluster.kubectl("-n", release.namespace, "rollout", "status", f"statefulset/{release.name}")
    cluster.kubectl(
        "-n", release.namespace, "rollout", "status", f"statefulset/{release.name}-qdrant"
    )

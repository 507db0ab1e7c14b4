"""EngramAgents end to end: the real operator (kopf) against an emulated API server (kmock)."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from engram_contract.permissions import (
    CONFIGMAP_KEY,
    Operation,
    PermissionConfig,
    Trust,
    hash_token,
    load_permission_config,
)
from engram_operator.kube import CONFIGMAPS, ENGRAM_AGENTS, SECRETS
from engram_operator.naming import LABEL_AGENT
from tests.engram_operator.kopf_harness import (
    OPERATOR_NS,
    RELEASE_REF,
    Cluster,
    StartOperator,
    events_about,
    eventually,
    make_settings,
)

pytestmark = pytest.mark.usefixtures("cluster")
NS = "team-a"
CM_NAME = "engram-permissions"


def agent_body(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("identity", {"token": {"enabled": True}})
    # Outside the release namespace a resource names its release.
    spec.setdefault("release", RELEASE_REF)
    return {
        "apiVersion": "engram.dev/v1alpha1",
        "kind": "EngramAgent",
        "metadata": {"name": name},
        "spec": spec,
    }


async def read_config(cluster: Cluster) -> PermissionConfig | None:
    cm = await cluster.get(CONFIGMAPS, OPERATOR_NS, CM_NAME)
    if cm is None:
        return None
    return load_permission_config(cm["data"][CONFIGMAP_KEY])


async def config_where(cluster: Cluster, check: Any, what: str) -> PermissionConfig:
    async def probe() -> PermissionConfig | None:
        config = await read_config(cluster)
        return config if config is not None and check(config) else None

    return await eventually(probe, what=what)


def ready(obj: dict[str, Any] | None) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == "Ready":
            return dict(cond)
    return {}


async def agent_where(
    cluster: Cluster, name: str, check: Any, what: str, namespace: str = NS
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        obj = await cluster.get(ENGRAM_AGENTS, namespace, name)
        return obj if obj is not None and check(obj) else None

    return await eventually(probe, what=what)


def token_in(secret: dict[str, Any]) -> str:
    return base64.b64decode(secret["data"]["token"]).decode()


async def test_created_agent_gets_a_token_secret_and_only_its_hash_in_the_configmap(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(
        ENGRAM_AGENTS,
        NS,
        agent_body(
            "writer",
            read=["agent:writer"],
            write=["agent:writer"],
            types=["procedure", "task_log"],
            operations=["add", "search", "get_all"],
            maxTrust="medium",
        ),
    )
    config = await config_where(cluster, lambda c: "writer" in c.agents, "writer in the config")
    secret = await cluster.get(SECRETS, NS, "writer-engram-token")
    token = token_in(secret)

    policy = config.agents["writer"]
    assert policy.token_sha256 == [hash_token(token)]
    assert policy.read == ["agent:writer"]
    assert policy.write == ["agent:writer"]
    assert [t.value for t in policy.types] == ["procedure", "task_log"]
    assert policy.operations == [Operation.add, Operation.search, Operation.get_all]
    assert policy.max_trust is Trust.medium
    assert len(token) >= 43
    owner = secret["metadata"]["ownerReferences"][0]
    created = await cluster.get(ENGRAM_AGENTS, NS, "writer")
    assert owner["uid"] == created["metadata"]["uid"]
    assert owner["controller"] is True
    assert secret["metadata"]["labels"][LABEL_AGENT] == "writer"

    obj = await agent_where(cluster, "writer", lambda o: ready(o).get("status") == "True", "Ready")
    assert obj["status"]["agentName"] == "writer"
    assert obj["status"]["tokenSecret"] == {"name": "writer-engram-token", "key": "token"}
    assert obj["status"]["observedGeneration"] == 1
    assert ready(obj)["observedGeneration"] == 1


async def test_token_never_leaves_its_secret(
    cluster: Cluster, operator: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("main", read=["global"]))
    await agent_where(cluster, "main", lambda o: ready(o).get("status") == "True", "Ready")
    token = token_in(await cluster.get(SECRETS, NS, "main-engram-token"))
    encoded = base64.b64encode(token.encode()).decode()

    carriers = [
        req for req in cluster.operator_requests() if token in req.text or encoded in req.text
    ]
    # Exactly one request carries the token: the POST that created the Secret.
    assert [(r.method.value, r.url.path) for r in carriers] == [
        ("POST", f"/api/v1/namespaces/{NS}/secrets")
    ]
    assert token not in caplog.text
    assert encoded not in caplog.text
    cm = await cluster.get(CONFIGMAPS, OPERATOR_NS, CM_NAME)
    assert token not in str(cm)
    assert token not in str(await cluster.get(ENGRAM_AGENTS, NS, "main"))


async def test_updating_an_agent_rewrites_its_policy_and_observed_generation(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("analyst", read=["global"]))
    await agent_where(cluster, "analyst", lambda o: ready(o).get("status") == "True", "Ready")

    await cluster.patch(
        ENGRAM_AGENTS, NS, "analyst", {"spec": {"read": ["global", "group:*"], "maxTrust": "low"}}
    )
    config = await config_where(
        cluster, lambda c: c.agents["analyst"].read == ["global", "group:*"], "new read scopes"
    )
    assert config.agents["analyst"].max_trust is Trust.low
    obj = await agent_where(
        cluster, "analyst", lambda o: o["status"].get("observedGeneration") == 2, "generation 2"
    )
    assert ready(obj)["observedGeneration"] == 2


async def test_disabling_the_token_deletes_its_secret_and_hash(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(
        ENGRAM_AGENTS,
        NS,
        agent_body(
            "browser",
            read=["agent:browser"],
            identity={
                "token": {"enabled": True},
                "serviceAccounts": [{"namespace": "agents", "name": "browser"}],
            },
        ),
    )
    await config_where(
        cluster,
        lambda c: c.agents.get("browser") and c.agents["browser"].token_sha256,
        "token hash",
    )

    await cluster.patch(
        ENGRAM_AGENTS, NS, "browser", {"spec": {"identity": {"token": {"enabled": False}}}}
    )
    config = await config_where(
        cluster, lambda c: c.agents["browser"].token_sha256 == [], "token hash removed"
    )
    assert [(sa.namespace, sa.name) for sa in config.agents["browser"].service_accounts] == [
        ("agents", "browser")
    ]
    assert await cluster.get(SECRETS, NS, "browser-engram-token") is None
    obj = await agent_where(
        cluster, "browser", lambda o: "tokenSecret" not in o["status"], "no tokenSecret"
    )
    assert ready(obj)["status"] == "True"


async def test_deleting_an_agent_removes_its_entry_and_its_secret(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("main", read=["global"]))
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("devops", read=["global"]))
    await config_where(cluster, lambda c: set(c.agents) == {"main", "devops"}, "both agents")

    await cluster.delete(ENGRAM_AGENTS, NS, "main")
    config = await config_where(cluster, lambda c: set(c.agents) == {"devops"}, "main removed")
    assert config.agents["devops"].token_sha256
    await eventually(lambda: _gone(cluster, ENGRAM_AGENTS, NS, "main"), what="finalizer released")
    assert await cluster.get(SECRETS, NS, "main-engram-token") is None
    assert await cluster.get(SECRETS, NS, "devops-engram-token") is not None


async def _gone(cluster: Cluster, kind: Any, ns: str, name: str) -> bool:
    return await cluster.get(kind, ns, name) is None


async def test_later_duplicate_name_is_not_ready_and_takes_over_when_the_first_goes(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(ENGRAM_AGENTS, "team-a", agent_body("worker", read=["global"]))
    first = await agent_where(
        cluster, "worker", lambda o: ready(o).get("status") == "True", "first Ready", "team-a"
    )
    await cluster.create(ENGRAM_AGENTS, "team-b", agent_body("worker", read=["global", "group:*"]))
    second = await agent_where(
        cluster,
        "worker",
        lambda o: ready(o).get("reason") == "DuplicateAgentName",
        "duplicate reported",
        "team-b",
    )
    assert ready(second)["status"] == "False"
    assert "team-a/worker" in ready(second)["message"]
    config = await read_config(cluster)
    assert config is not None
    first_token = token_in(await cluster.get(SECRETS, "team-a", "worker-engram-token"))
    assert config.agents["worker"].read == ["global"]
    assert config.agents["worker"].token_sha256 == [hash_token(first_token)]
    assert first["metadata"]["uid"]

    await cluster.delete(ENGRAM_AGENTS, "team-a", "worker")
    config = await config_where(
        cluster, lambda c: c.agents["worker"].read == ["global", "group:*"], "second takes over"
    )
    second_token = token_in(await cluster.get(SECRETS, "team-b", "worker-engram-token"))
    assert config.agents["worker"].token_sha256 == [hash_token(second_token)]
    await agent_where(
        cluster, "worker", lambda o: ready(o).get("status") == "True", "second Ready", "team-b"
    )


async def test_invalid_agent_is_not_ready_with_the_reason_and_left_out(
    cluster: Cluster, operator: Any
) -> None:
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("good", read=["global"]))
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("bad", read=["global"], write=["group:"]))
    obj = await agent_where(
        cluster, "bad", lambda o: ready(o).get("reason") == "InvalidSpec", "InvalidSpec"
    )
    assert "spec.write.0" in ready(obj)["message"]
    events = await eventually(lambda: events_about(cluster, NS, "bad"), what="an event")
    assert events[0][:2] == ("Warning", "InvalidSpec")
    assert "spec.write.0" in events[0][2]
    config = await config_where(cluster, lambda c: "good" in c.agents, "good agent")
    assert "bad" not in config.agents
    assert await cluster.get(SECRETS, NS, "bad-engram-token") is None


async def test_a_foreign_secret_is_never_taken_as_the_token(
    cluster: Cluster, operator: Any
) -> None:
    stolen = "x" * 43
    await cluster.create(
        SECRETS,
        NS,
        {
            "metadata": {"name": "main-engram-token"},
            "data": {"token": base64.b64encode(stolen.encode()).decode()},
        },
    )
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("main", read=["global"]))
    obj = await agent_where(
        cluster, "main", lambda o: ready(o).get("reason") == "TokenSecretConflict", "conflict"
    )
    assert "not owned" in ready(obj)["message"]
    config = await config_where(cluster, lambda c: "main" in c.agents, "main in config")
    assert config.agents["main"].token_sha256 == []
    assert hash_token(stolen) not in str(config)


async def test_an_emptied_token_secret_gets_a_new_token(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(resync_seconds=0.3))
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("main", read=["global"]))
    first = await config_where(
        cluster, lambda c: "main" in c.agents and c.agents["main"].token_sha256, "token hash"
    )
    await cluster.patch(SECRETS, NS, "main-engram-token", {"data": {"token": None}})

    config = await config_where(
        cluster,
        lambda c: c.agents["main"].token_sha256 not in ([], first.agents["main"].token_sha256),
        "a new token hash",
    )
    token = token_in(await cluster.get(SECRETS, NS, "main-engram-token"))
    assert config.agents["main"].token_sha256 == [hash_token(token)]


async def test_a_deleted_token_secret_is_recreated_on_resync(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(resync_seconds=0.3))
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("main", read=["global"]))
    first = await config_where(
        cluster, lambda c: "main" in c.agents and c.agents["main"].token_sha256, "token hash"
    )
    await cluster.delete(SECRETS, NS, "main-engram-token")

    async def recreated() -> dict[str, Any] | None:
        secret = await cluster.get(SECRETS, NS, "main-engram-token")
        return secret if secret is not None else None

    secret = await eventually(recreated, what="Secret recreated")
    config = await config_where(
        cluster,
        lambda c: c.agents["main"].token_sha256 == [hash_token(token_in(secret))],
        "config follows the new token",
    )
    assert config.agents["main"].token_sha256 != first.agents["main"].token_sha256


async def test_without_agents_the_operator_still_writes_an_empty_config(
    cluster: Cluster, operator: Any
) -> None:
    config = await config_where(cluster, lambda c: True, "a config")
    assert config.agents == {}
    assert config.default_policy.read == ["global"]


async def test_agents_outside_the_watched_namespaces_are_ignored(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(namespaces="team-a"))
    await cluster.create(ENGRAM_AGENTS, "team-b", agent_body("outsider", read=["global"]))
    await cluster.create(ENGRAM_AGENTS, "team-a", agent_body("insider", read=["global"]))
    config = await config_where(cluster, lambda c: "insider" in c.agents, "insider")
    assert "outsider" not in config.agents
    assert await cluster.get(SECRETS, "team-b", "outsider-engram-token") is None


async def test_an_agent_created_while_the_operator_was_down_is_folded_at_start(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    first = await start_operator()
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("main", read=["global"]))
    before = await config_where(
        cluster, lambda c: "main" in c.agents and c.agents["main"].token_sha256, "main"
    )
    await first.stop()

    await cluster.create(ENGRAM_AGENTS, NS, agent_body("devops", read=["global"]))
    await start_operator()
    after = await config_where(cluster, lambda c: set(c.agents) == {"main", "devops"}, "both")
    # The existing token survives the restart.
    assert after.agents["main"].token_sha256 == before.agents["main"].token_sha256


async def test_a_hand_edited_configmap_is_put_back_by_the_resync(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(make_settings(resync_seconds=0.3))
    await cluster.create(ENGRAM_AGENTS, NS, agent_body("main", read=["global"]))
    before = await config_where(cluster, lambda c: "main" in c.agents, "main in the config")
    await cluster.patch(
        CONFIGMAPS, OPERATOR_NS, CM_NAME, {"data": {CONFIGMAP_KEY: "version: 1\nagents: {}\n"}}
    )
    after = await config_where(cluster, lambda c: "main" in c.agents, "main restored")
    assert after == before

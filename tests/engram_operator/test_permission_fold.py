"""Folding EngramAgents into one permission config (pure)."""

from __future__ import annotations

from typing import Any

from engram_contract.permissions import (
    Operation,
    Trust,
    dump_permission_config,
    load_permission_config,
)
from engram_operator.folding import AgentSnapshot, TokenState, fold_agents

CM = "engram/engram-permissions"


def snap(
    name: str,
    *,
    ns: str = "team-a",
    created: str = "2026-11-29T10:00:00Z",
    deleting: bool = False,
    **spec: Any,
) -> AgentSnapshot:
    spec.setdefault("identity", {"token": {"enabled": True}})
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": f"{ns}/{name}",
        "creationTimestamp": created,
        "generation": 1,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    return AgentSnapshot.from_body({"metadata": meta, "spec": spec})


def token(n: int) -> TokenState:
    return TokenState(sha256=f"{n:064x}")


def test_each_agent_becomes_its_policy_with_its_token_hash() -> None:
    writer = snap(
        "writer",
        read=["agent:writer"],
        write=["agent:writer"],
        types=["procedure", "task_log"],
        operations=["add", "search"],
        maxTrust="low",
        allowUserDirect=True,
        identity={"token": {"enabled": True}, "serviceAccounts": [{"namespace": "a", "name": "w"}]},
    )
    fold = fold_agents([writer], {writer.uid: token(1)}, configmap=CM)
    policy = fold.config.agents["writer"]
    assert policy.read == ["agent:writer"]
    assert policy.write == ["agent:writer"]
    assert [t.value for t in policy.types] == ["procedure", "task_log"]
    assert policy.operations == [Operation.add, Operation.search]
    assert policy.max_trust is Trust.low
    assert policy.allow_user_direct is True
    assert policy.token_sha256 == [f"{1:064x}"]
    assert [(sa.namespace, sa.name) for sa in policy.service_accounts] == [("a", "w")]
    verdict = fold.verdicts[writer.uid]
    assert verdict.ready
    assert verdict.reason == "Configured"
    assert CM in verdict.message
    assert verdict.token_secret == "writer-engram-token"


def test_agent_name_defaults_to_the_resource_name_and_can_be_set() -> None:
    named = snap("writer-v2", agentName="writer", read=["global"])
    fold = fold_agents([named], {named.uid: token(1)}, configmap=CM)
    assert list(fold.config.agents) == ["writer"]
    assert fold.verdicts[named.uid].agent_name == "writer"


def test_the_later_of_two_agents_with_one_name_is_left_out_with_a_reason() -> None:
    older = snap("worker", ns="team-b", created="2026-11-29T10:00:00Z", read=["global"])
    newer = snap("worker", ns="team-a", created="2026-11-29T10:00:01Z", read=["group:*"])
    fold = fold_agents([newer, older], {older.uid: token(1), newer.uid: token(2)}, configmap=CM)
    assert fold.config.agents["worker"].read == ["global"]
    assert fold.config.agents["worker"].token_sha256 == [f"{1:064x}"]
    verdict = fold.verdicts[newer.uid]
    assert (verdict.ready, verdict.reason) == (False, "DuplicateAgentName")
    assert "team-b/worker" in verdict.message
    assert fold.verdicts[older.uid].ready


def test_same_creation_time_is_broken_by_namespace_then_name() -> None:
    same = "2026-11-29T10:00:00Z"
    a = snap("x", ns="alpha", created=same, agentName="shared", read=["global"])
    b = snap("x", ns="beta", created=same, agentName="shared", read=["dm"])
    c = snap("a", ns="beta", created=same, agentName="shared", read=["group:*"])
    for order in ([a, b, c], [c, b, a], [b, a, c]):
        fold = fold_agents(order, {s.uid: token(i) for i, s in enumerate(order)}, configmap=CM)
        assert fold.config.agents["shared"].read == ["global"]
    only_beta = fold_agents([b, c], {b.uid: token(1), c.uid: token(2)}, configmap=CM)
    assert only_beta.config.agents["shared"].read == ["group:*"]  # beta/a before beta/x


def test_deleting_and_invalid_agents_contribute_nothing() -> None:
    going = snap("going", deleting=True, read=["global"])
    broken = snap("broken", write=["group:"])
    fold = fold_agents([going, broken], {going.uid: token(1)}, configmap=CM)
    assert fold.config.agents == {}
    assert going.uid not in fold.verdicts
    verdict = fold.verdicts[broken.uid]
    assert (verdict.ready, verdict.reason) == (False, "InvalidSpec")
    assert "spec.write.0" in verdict.message


def test_a_service_account_bound_twice_goes_to_the_older_agent_only() -> None:
    sa = {"serviceAccounts": [{"namespace": "agents", "name": "bot"}]}
    older = snap("first", created="2026-11-29T10:00:00Z", read=["global"], identity=sa)
    newer = snap("second", created="2026-11-29T11:00:00Z", read=["global"], identity=sa)
    fold = fold_agents([older, newer], {}, configmap=CM)
    assert list(fold.config.agents) == ["first"]
    verdict = fold.verdicts[newer.uid]
    assert (verdict.ready, verdict.reason) == (False, "DuplicateServiceAccount")
    assert "agents/bot" in verdict.message


def test_a_token_found_in_two_secrets_is_trusted_for_the_older_agent_only() -> None:
    older = snap("first", created="2026-11-29T10:00:00Z", read=["global"])
    newer = snap("second", created="2026-11-29T11:00:00Z", read=["global"])
    fold = fold_agents([older, newer], {older.uid: token(7), newer.uid: token(7)}, configmap=CM)
    assert fold.config.agents["first"].token_sha256 == [f"{7:064x}"]
    assert fold.config.agents["second"].token_sha256 == []
    assert fold.verdicts[newer.uid].reason == "DuplicateToken"


def test_a_pending_or_conflicting_token_leaves_the_agent_tokenless_and_not_ready() -> None:
    pending = snap("pending", read=["global"])
    conflict = snap("conflict", read=["global"])
    fold = fold_agents(
        [pending, conflict],
        {conflict.uid: TokenState(problem="Secret team-a/conflict-engram-token is foreign")},
        configmap=CM,
    )
    assert fold.config.agents["pending"].token_sha256 == []
    assert fold.config.agents["conflict"].token_sha256 == []
    assert fold.verdicts[pending.uid].reason == "TokenPending"
    assert fold.verdicts[conflict.uid].reason == "TokenSecretConflict"
    assert "foreign" in fold.verdicts[conflict.uid].message


def test_an_agent_without_a_token_needs_no_token_state() -> None:
    sa_only = snap(
        "sa", read=["global"], identity={"serviceAccounts": [{"namespace": "a", "name": "b"}]}
    )
    fold = fold_agents([sa_only], {}, configmap=CM)
    assert fold.verdicts[sa_only.uid].ready
    assert fold.verdicts[sa_only.uid].token_secret is None


def test_the_folded_config_round_trips_through_the_services_loader() -> None:
    agents = [snap(f"a{i}", created=f"2026-11-29T10:00:0{i}Z", read=["global"]) for i in range(3)]
    fold = fold_agents(agents, {s.uid: token(i) for i, s in enumerate(agents)}, configmap=CM)
    text = dump_permission_config(fold.config)
    assert load_permission_config(text) == fold.config
    assert dump_permission_config(load_permission_config(text)) == text


def test_no_agents_fold_to_the_default_policy_only() -> None:
    fold = fold_agents([], {}, configmap=CM)
    assert fold.config.agents == {}
    assert fold.config.default_policy.read == ["global"]


def test_snapshot_of_a_malformed_body_is_invalid_not_an_exception() -> None:
    broken = AgentSnapshot.from_body(
        {"metadata": {"name": "x", "namespace": "n", "uid": "u"}, "spec": "nope"}
    )
    assert broken.spec is None
    assert broken.spec_error
    nameless_time = AgentSnapshot.from_body(
        {
            "metadata": {"name": "x", "namespace": "n", "uid": "u", "creationTimestamp": "garbage"},
            "spec": {"identity": {"token": {"enabled": True}}},
        }
    )
    assert nameless_time.spec is not None

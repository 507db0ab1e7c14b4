"""The permission matrix: every (agent, scope, type, operation) of a small config, by table."""

from __future__ import annotations

import itertools

import pytest

from engram_api.errors import InvalidInput, PermissionDenied
from engram_api.memory.model import Source
from engram_api.memory.policy import PolicyEngine
from engram_contract.permissions import (
    AgentPolicy,
    MemType,
    Operation,
    PermissionConfig,
    Trust,
    builtin_permission_config,
    load_permission_config,
)

CONFIG = PermissionConfig(
    agents={
        "lead": AgentPolicy(
            read=["global", "group:*"],
            write=["global", "group:alpha"],
            types=[MemType.fact, MemType.preference],
            operations=[Operation.add, Operation.search, Operation.get_all],
            max_trust=Trust.high,
        ),
        "worker": AgentPolicy(
            read=["agent:worker"],
            write=["agent:worker"],
            types=[MemType.procedure, MemType.task_log],
            operations=[Operation.add, Operation.search],
            max_trust=Trust.medium,
        ),
    }
)
AGENTS = ["lead", "worker", "stranger"]
SCOPES = ["global", "group:alpha", "group:beta", "agent:worker", "agent:other", "dm"]
TYPES = [MemType.fact, MemType.procedure]

# Written out by hand: the expected answer for every write combination.
WRITE_ALLOWED = {
    ("lead", "global", MemType.fact),
    ("lead", "group:alpha", MemType.fact),
    ("worker", "agent:worker", MemType.procedure),
}
READ_ALLOWED = {
    ("lead", "global"),
    ("lead", "group:alpha"),
    ("lead", "group:beta"),
    ("worker", "agent:worker"),
    ("stranger", "global"),
}
OPS = {
    "lead": {Operation.add, Operation.search, Operation.get_all},
    "worker": {Operation.add, Operation.search},
    "stranger": {Operation.search},
}


@pytest.mark.parametrize(
    ("agent", "scope", "mem_type"), list(itertools.product(AGENTS, SCOPES, TYPES))
)
def test_write_permission_matches_the_table(agent: str, scope: str, mem_type: MemType) -> None:
    engine = PolicyEngine(CONFIG)
    if (agent, scope, mem_type) in WRITE_ALLOWED:
        engine.check_write(agent, scope, mem_type)
    else:
        with pytest.raises(PermissionDenied):
            engine.check_write(agent, scope, mem_type)


@pytest.mark.parametrize(("agent", "scope"), list(itertools.product(AGENTS, SCOPES)))
def test_read_permission_matches_the_table(agent: str, scope: str) -> None:
    assert PolicyEngine(CONFIG).can_read(agent, scope) == ((agent, scope) in READ_ALLOWED)


@pytest.mark.parametrize(("agent", "op"), list(itertools.product(AGENTS, list(Operation))))
def test_operation_permission_matches_the_table(agent: str, op: Operation) -> None:
    engine = PolicyEngine(CONFIG)
    if op in OPS[agent]:
        engine.require(agent, op)
    else:
        with pytest.raises(PermissionDenied):
            engine.require(agent, op)


def test_wildcard_never_matches_an_empty_id() -> None:
    engine = PolicyEngine(CONFIG)
    assert not engine.can_read("lead", "group:")
    assert engine.can_read("lead", "group:x")


def test_cross_scope_needs_read_on_the_group_itself() -> None:
    engine = PolicyEngine(CONFIG)
    plan = engine.plan_search("lead", "cross:beta")
    assert plan.searched == ("group:beta", "global")
    with pytest.raises(PermissionDenied):
        engine.plan_search("worker", "cross:beta")


def test_all_means_every_readable_scope_and_never_more() -> None:
    plan = PolicyEngine(CONFIG).plan_search("worker", "all")
    (sel,) = plan.queries
    assert sel.covers("agent:worker")
    assert not sel.covers("global")
    assert not sel.covers("agent:other")


def test_scoped_search_adds_global_only_when_readable() -> None:
    engine = PolicyEngine(CONFIG)
    assert engine.plan_search("lead", "group:alpha").searched == ("group:alpha", "global")
    assert engine.plan_search("worker", "agent:worker").searched == ("agent:worker",)


def test_unknown_agent_can_only_search_global() -> None:
    engine = PolicyEngine(CONFIG)
    assert engine.plan_search("stranger", "global").searched == ("global",)
    with pytest.raises(PermissionDenied):
        engine.plan_search("stranger", "group:alpha")
    with pytest.raises(PermissionDenied):
        engine.check_write("stranger", "global", MemType.fact)


def test_trust_above_the_agents_maximum_is_capped() -> None:
    engine = PolicyEngine(CONFIG)
    assert engine.cap_trust("worker", Trust.high) == (Trust.medium, True)
    assert engine.cap_trust("worker", Trust.low) == (Trust.low, False)
    assert engine.cap_trust("lead", Trust.high) == (Trust.high, False)


def test_only_agents_allowed_user_direct_may_claim_it() -> None:
    engine = PolicyEngine(builtin_permission_config())
    engine.check_source("main", Source.user_direct)
    with pytest.raises(PermissionDenied, match="user_direct"):
        engine.check_source("someone", Source.user_direct)


@pytest.mark.parametrize(
    "scope", ["group:", "cross:", "nonsense", "agent:a b", "group:" + "x" * 129]
)
def test_malformed_search_scopes_are_rejected_by_name(scope: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        PolicyEngine(CONFIG).plan_search("lead", scope)
    assert exc.value.field == "scope"


def test_builtin_config_reproduces_the_prototype_agents() -> None:
    engine = PolicyEngine(builtin_permission_config())
    engine.check_write("main", "group:team", MemType.lesson)
    with pytest.raises(PermissionDenied):
        engine.check_write("main", "agent:writer", MemType.fact)
    with pytest.raises(PermissionDenied):
        engine.require("main", Operation.maintenance)
    engine.require("devops", Operation.maintenance)
    engine.check_write("devops", "agent:writer", MemType.fact)
    assert engine.can_read("main", "agent:writer")


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ("agents: {a: {read: ['group:']}}", "agents.a.read"),
        ("agents: {a: {write: ['*']}}", "agents.a.write"),
        ("agents: {a: {types: [secret]}}", "agents.a.types"),
        ("agents: {a: {max_trust: ultra}}", "agents.a.max_trust"),
        ("agents: {a: {colour: red}}", "agents.a.colour"),
        ("version: 7", "version"),
        ("- just a list", "must be a mapping"),
    ],
)
def test_a_bad_permission_document_names_the_key(doc: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace(".", r"\.")):
        load_permission_config(doc)


def test_a_token_hash_bound_to_two_agents_is_rejected() -> None:
    digest = "a" * 64
    doc = f"agents: {{a: {{token_sha256: ['{digest}']}}, b: {{token_sha256: ['{digest}']}}}}"
    with pytest.raises(ValueError, match="already belongs"):
        load_permission_config(doc)

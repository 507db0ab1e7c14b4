"""The operator's own reading of specs: the same rules as the CRDs, errors that name fields."""

from __future__ import annotations

import pytest

from engram_contract.permissions import MemType, Operation, Trust
from engram_contract.report import Task
from engram_operator.models import (
    DEFAULT_OPERATIONS,
    NEVER_SCHEDULE,
    SpecError,
    parse_agent_spec,
    parse_maintenance_spec,
)

TOKEN = {"token": {"enabled": True}}


def test_an_agent_spec_gets_the_documented_defaults() -> None:
    spec = parse_agent_spec({"identity": TOKEN}, resource_name="a")
    assert spec.read == []
    assert spec.write == []
    assert spec.types == list(MemType)
    assert spec.operations == list(DEFAULT_OPERATIONS)
    assert Operation.maintenance not in spec.operations
    assert spec.max_trust is Trust.medium
    assert spec.allow_user_direct is False
    assert spec.agent_name is None


def test_errors_name_every_offending_field_in_the_crds_spelling() -> None:
    with pytest.raises(SpecError) as caught:
        parse_agent_spec(
            {"read": ["global", "all"], "maxTrust": "root", "identity": {}}, resource_name="a"
        )
    message = str(caught.value)
    assert "spec.read.1: scope pattern 'all'" in message
    assert "spec.maxTrust:" in message
    assert "spec.identity: an agent needs an identity" in message


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"write": ["group:"]}, "spec.write.0"),
        ({"read": ["cross:team"]}, "spec.read.0"),
        ({"read": ["global", "global"]}, "unique"),
        ({"types": ["secret"]}, "spec.types.0"),
        ({"operations": ["delete"]}, "spec.operations.0"),
        ({"write": ["global"], "operations": ["search"]}, "'add' operation"),
        ({"agentName": "has space"}, "spec.agentName"),
        ({"identity": {"serviceAccounts": [{"namespace": "Bad_NS", "name": "x"}]}}, "namespace"),
    ],
)
def test_bad_agent_specs_are_refused(spec: dict[str, object], expected: str) -> None:
    spec.setdefault("identity", TOKEN)
    with pytest.raises(SpecError, match=expected):
        parse_agent_spec(spec, resource_name="a")


def test_resource_names_too_long_for_their_children_are_refused() -> None:
    with pytest.raises(SpecError, match="63 characters"):
        parse_agent_spec({"identity": TOKEN}, resource_name="a" * 64)
    parse_agent_spec({"identity": TOKEN}, resource_name="a" * 63)
    with pytest.raises(SpecError, match="52 characters"):
        parse_maintenance_spec({"task": "daily", "schedule": "@daily"}, resource_name="m" * 53)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"task": "daily"}, "schedule is required unless suspend is true"),
        ({"task": "backup", "schedule": "@daily", "dryRun": True}, "dryRun is not supported"),
        ({"task": "daily", "schedule": "@daily", "retention": {"keep": 2}}, "retention applies"),
        ({"task": "backup", "schedule": "@daily", "retention": {"keep": 0}}, "spec.retention.keep"),
        ({"task": "daily", "schedule": "0 3 * *"}, "spec.schedule"),
        ({"task": "daily", "schedule": "TZ=UTC 0 3 * * *"}, "spec.schedule"),
        ({"task": "daily", "schedule": "@daily", "timeZone": "../etc"}, "spec.timeZone"),
        ({"task": "daily", "schedule": "@daily", "historyLimit": 101}, "spec.historyLimit"),
        (
            {"task": "daily", "schedule": "@daily", "resources": {"limits": {"memory": "lots"}}},
            "memory",
        ),
        ({"task": "hourly", "schedule": "@daily"}, "spec.task"),
    ],
)
def test_bad_maintenance_specs_are_refused(spec: dict[str, object], expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        parse_maintenance_spec(spec, resource_name="m")


def test_a_suspended_maintenance_needs_no_schedule() -> None:
    spec = parse_maintenance_spec({"task": "weekly", "suspend": True}, resource_name="m")
    assert spec.task is Task.weekly
    assert spec.effective_schedule == NEVER_SCHEDULE


def test_unknown_fields_are_ignored_like_a_pruning_api_server() -> None:
    spec = parse_maintenance_spec(
        {"task": "daily", "schedule": "@daily", "future": 1}, resource_name="m"
    )
    assert spec.schedule == "@daily"

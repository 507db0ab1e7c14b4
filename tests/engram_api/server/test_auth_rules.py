"""The identity rules on their own: token lookup, loopback detection, ServiceAccount names."""

from __future__ import annotations

import pytest

from engram_api.server.auth import (
    agent_for_service_account,
    agent_for_token,
    is_loopback,
)
from engram_api.server.tokenreview import parse_username
from tests.engram_api.server.harness import ALPHA_TOKEN, BETA_TOKEN, SA_TOKEN, token_config


def test_a_token_maps_to_the_agent_holding_its_hash() -> None:
    config = token_config()
    assert agent_for_token(config, ALPHA_TOKEN) == "alpha"
    assert agent_for_token(config, BETA_TOKEN) == "beta"
    assert agent_for_token(config, SA_TOKEN) is None
    assert agent_for_token(config, ALPHA_TOKEN.upper()) is None


def test_a_service_account_maps_to_the_agent_binding_it() -> None:
    config = token_config()
    assert agent_for_service_account(config, "team-a", "bot") == "ops"
    assert agent_for_service_account(config, "team-b", "bot") is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("engram.example.com", False),
    ],
)
def test_loopback_addresses_are_recognised(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("username", "parsed"),
    [
        ("system:serviceaccount:team-a:bot", ("team-a", "bot")),
        ("system:serviceaccount:team-a", None),
        ("system:serviceaccount:team-a:bot:extra", None),
        ("system:serviceaccount::bot", None),
        ("alice@example.com", None),
        ("system:node:worker-1", None),
    ],
)
def test_only_service_account_usernames_are_accepted(
    username: str, parsed: tuple[str, str] | None
) -> None:
    assert parse_username(username) == parsed

"""The secret guard: the formats people actually leak, and prose that only mentions them."""

from __future__ import annotations

import pytest

from engram_api.errors import SecretDetected
from engram_api.memory.guards import SecretGuard, SecretPatternError

LEAKS = [
    "key sk-abcdefghijklmnopqrstuvwxyz0123",
    "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "anthropic: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv",
    "SK-ANT-API03-ABCDEFGHIJKLMNOPQRSTUV",
    "token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "AKIAIOSFODNN7EXAMPLE is the key id",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
    "xoxb-123456789012-abcdefghijkl",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE...",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "-----BEGIN EC PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "password = hunter22",
    "PASSWORD: correcthorsebattery",
    "api_key=abcd1234efgh",
    "my password is hunter2",
    "The Wi-Fi password is swordfish99",
    "postgres://admin:s3cret@db.internal:5432/app",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456",
]

HARMLESS = [
    "max token: 500",
    "The token budget for a run is configurable",
    "User prefers dark mode",
    "Rotate the API key every 90 days; it lives in the vault under prod/api",
    "We store passwords hashed with argon2",
    "Use https://example.com/docs for the reference",
    "sk-learn is a typo for scikit-learn",
]


@pytest.mark.parametrize("text", LEAKS)
def test_known_credential_formats_are_refused(text: str) -> None:
    assert SecretGuard().find(text) is not None, text


@pytest.mark.parametrize("text", HARMLESS)
def test_prose_that_only_mentions_secrets_passes(text: str) -> None:
    assert SecretGuard().find(text) is None, text


def test_context_is_scanned_as_well_as_content() -> None:
    with pytest.raises(SecretDetected) as exc:
        SecretGuard().check(content="deploy notes", context="password=hunter22")
    assert exc.value.field == "context"


def test_the_error_names_the_kind_of_secret_but_never_the_secret() -> None:
    with pytest.raises(SecretDetected) as exc:
        SecretGuard().check(content="sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345")
    assert "OpenAI" in str(exc.value)
    assert "AbCdEf" not in str(exc.value)


def test_configured_extra_patterns_are_enforced() -> None:
    guard = SecretGuard(["internal-[0-9]{6}"])
    assert guard.find("ticket INTERNAL-123456") == "configured pattern #1"


def test_an_invalid_configured_pattern_is_a_startup_error_naming_it() -> None:
    with pytest.raises(SecretPatternError, match=r"extra_secret_patterns\[1\]"):
        SecretGuard(["ok", "broken("])

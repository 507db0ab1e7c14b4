"""Key-assignment shapes: the key says where a credential would be, the value decides."""

from __future__ import annotations

import pytest

from engram_api.memory.secrets.shapes import find

NAMED = [
    "db:\n  password: swordfish",
    "password: swordfish",
    "export GITHUB_TOKEN=Xq3kV9mW2pL7",
    "const apiKey = 'Zq8KmW3vXp7LnR2t';",
    "clientSecret: 9fK2mQ7vX4pL8nR3",
    "Log in as root with password Winter2026!",
    "the wifi password is now p@ssw0rd99",
    "新的口令设为 Xk29fQ7vL3pW",
    "password: 73918264",
]

NOT_NAMED = [
    "Password: ask the on-call",
    "the password: see the vault",
    "token_type: bearer",
    "password_length = 16",
    "max_tokens = 4096",
    "secretName: db-credentials",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "api_key = os.getenv('STRIPE_API_KEY')",
    "password_changed_at: 2026-11-28T10:00:00Z",
    "The password is hashed with bcrypt cost 12",
    "The secret is base64 encoded in the manifest",
    "密钥长度是 256 位",
    "密码: 问值班的同事",
    "monkey: banana42",
    "primary key: order_id",
]


@pytest.mark.parametrize("text", NAMED)
def test_a_value_that_looks_made_up_after_a_credential_key_is_a_hit(text: str) -> None:
    assert find(text) is not None


@pytest.mark.parametrize("text", NOT_NAMED)
def test_words_numbers_names_and_references_after_a_key_pass(text: str) -> None:
    assert find(text) is None

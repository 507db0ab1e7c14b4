"""Each secret-guard case from issue 15, refused or passed, and the error's wording."""

from __future__ import annotations

import base64

import pytest

from engram_api.errors import SecretDetected
from engram_api.memory.guards import SecretGuard

AWS_ID = "AKIAQGLNH7BM3EFUV67V"
OPENAI = "sk-proj-" + "Zq8K3vW9xLm2Pn7R" * 3

REFUSED = {
    "gitlab": "GITLAB_TOKEN=glpat-Xy7_kQ2mP9vN4tR6wL1z",
    "stripe live": "stripe key sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "stripe restricted": "rk_live_51HqLyjWDarjtT1zdp7dcXyZ",
    "sendgrid": "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",
    "npm": "//registry.npmjs.org/:_authToken=npm_Xq3kV9mW2pL7nR4tY8zB1cD5fG6hJ0kM2sQa",
    "hugging face": "HF_TOKEN=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",
    "azure storage": "DefaultEndpointsProtocol=https;AccountName=stlogs;AccountKey="
    + base64.b64encode(bytes(range(64))).decode()
    + ";EndpointSuffix=core.windows.net",
    "redis url": "REDIS_URL=redis://:Winter2026!x@redis.internal:6379/0",
    "password in prose": "my password is Tr0ub4dor&3",
    "secret assignment": "secret = 9fK2mQ7vX4pL8nR3tW6z",
    "db password env": "DB_PASSWORD=hunter22",
    "openai env": f"OPENAI_API_KEY={OPENAI}",
    "slack env": "SLACK_BOT_TOKEN=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "json api key": '{"api_key": "zq8KmW3vXp7LnR2t"}',
    "admin password for prod": "The admin password for prod: Tr0ub4dor&3",
    "64-hex api secret": "api secret: " + "3f9a" * 16,
    "engram token": "engram_q3VnWq8yZ1x2c3v4b5n6m7l8k9j0h1g2f3d4s5a6",
    "spaced aws key": " ".join(AWS_ID[i : i + 4] for i in range(0, 20, 4)),
    "split aws key": f'key = "{AWS_ID[:9]}" + "{AWS_ID[9:]}"',
    "zero-width key": "\u200b".join("ghp_Xq3kV9mW2pL7nR4tY8zB1cD5fG6hJ0kM2sQa"),
    "full-width key": "".join(chr(ord(c) + 0xFEE0) for c in "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    "base64 key": base64.b64encode(b"token=ghp_Xq3kV9mW2pL7nR4tY8zB1cD5fG6hJ0kM2sQa").decode(),
    "chinese password": "我的密码是 hunter22",
    "chinese token": "访问令牌：Xk29fQ7vL3pW",  # noqa: RUF001
    "yaml password": "db:\n  host: pg\n  password: Qz8!vK2m",
}

PASSES = [
    "the token is expired, refresh it",
    "the password is wrong for the staging db",
    "The access token is refreshed every hour",
    "max token: 100000",
    "pwd = /home/user/project",
    "令牌已过期，请刷新",  # noqa: RUF001
    "密码错误，请重新输入",  # noqa: RUF001
    "The DSN format is postgres://user:password@host/db",
    "api_key: ${OPENAI_API_KEY}",
    "password = os.environ['DB_PASSWORD']",
]


@pytest.mark.parametrize("case", list(REFUSED))
def test_each_missed_case_from_the_issue_is_refused(case: str) -> None:
    assert SecretGuard().find(REFUSED[case]) is not None, REFUSED[case]


@pytest.mark.parametrize("text", PASSES)
def test_each_harmless_sentence_from_the_issue_passes(text: str) -> None:
    assert SecretGuard().find(text) is None


def test_the_error_names_the_field_and_the_kind_but_never_the_value() -> None:
    with pytest.raises(SecretDetected) as exc:
        SecretGuard().check(content="deploy notes", context="DB_PASSWORD=hunter22")
    message = str(exc.value)
    assert message.startswith("context: ")
    assert "password" in message
    assert "hunter22" not in message


def test_a_provider_error_names_the_provider() -> None:
    with pytest.raises(SecretDetected) as exc:
        SecretGuard().check(content="stripe key sk_live_4eC39HqLyjWDarjtT1zdp7dc")
    assert "stripe" in str(exc.value).lower()
    assert "4eC39" not in str(exc.value)

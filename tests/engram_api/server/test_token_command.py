"""`engram token create <agent>`: a token printed once, and the hash line that admits it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engram_api.cli import main
from engram_api.settings import EngramSettings
from engram_contract.permissions import AgentPolicy, Operation, PermissionConfig, hash_token
from tests.engram_api.server.harness import call, serve


def test_token_create_prints_a_token_and_its_hash_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data-dir", str(tmp_path), "token", "create", "ci-bot"]) == 0
    out = capsys.readouterr().out
    token = out.splitlines()[1].strip()
    assert token.startswith("engram_")
    assert len(token) > 40
    assert f"      - {hash_token(token)}" in out
    assert "  ci-bot:\n    token_sha256:" in out


def test_two_tokens_are_never_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--data-dir", str(tmp_path), "--json", "token", "create", "a"])
    main(["--data-dir", str(tmp_path), "--json", "token", "create", "a"])
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["token"] != second["token"]
    assert first["token_sha256"] == hash_token(first["token"])


def test_token_create_rejects_a_bad_agent_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data-dir", str(tmp_path), "token", "create", "no spaces"]) == 2
    assert "agent: must be 1-128 characters" in capsys.readouterr().err


async def test_a_created_token_admits_its_agent_once_its_hash_is_in_the_file(
    make_settings: Callable[..., EngramSettings],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--data-dir", str(tmp_path), "--json", "token", "create", "ci-bot"])
    created = json.loads(capsys.readouterr().out)
    config = PermissionConfig(
        agents={
            "ci-bot": AgentPolicy(
                read=["global"],
                write=["global"],
                operations=[Operation.add],
                token_sha256=[created["token_sha256"]],
            )
        }
    )
    async with (
        serve(make_settings(permissions=config)) as running,
        running.client(created["token"]) as client,
    ):
        out = await call(client, "mem0_add", content="CI bot was here", scope="global")
    assert out["memory"]["agent"] == "ci-bot"

"""The `engram` command line, run as a real process against a real data dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engram_api.datadir import DataDirLock


def engram(
    data: Path, *args: str, agent: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess on ``data`` with the hash embedder."""
    full_env = {
        **os.environ,
        "ENGRAM_DATA_DIR": str(data),
        "ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER": "hash",
        **(env or {}),
    }
    full_env.pop("ENGRAM_CONFIG", None)
    pre = ["--agent", agent] if agent else []
    return subprocess.run(
        [sys.executable, "-m", "engram_api", *pre, *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_add_then_search_round_trips_as_json(tmp_path: Path) -> None:
    added = engram(
        tmp_path,
        "--json",
        "add",
        "User prefers dark mode",
        "--scope",
        "global",
        "--type",
        "preference",
        "--trust",
        "high",
    )
    assert added.returncode == 0, added.stderr
    memory_id = json.loads(added.stdout)["id"]
    found = engram(tmp_path, "--json", "search", "dark mode preference")
    assert found.returncode == 0, found.stderr
    body = json.loads(found.stdout)
    assert body["results"][0]["id"] == memory_id
    assert body["scopes_searched"] == ["global"]


def test_readable_output_is_a_table_not_json(tmp_path: Path) -> None:
    engram(tmp_path, "add", "the office is in paris", "--scope", "global")
    out = engram(tmp_path, "search", "office paris")
    assert "[global fact medium]  the office is in paris" in out.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(out.stdout)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["add", "x", "--scope", "group:"], "scope"),
        (["add", "x", "--scope", "global", "--type", "gossip"], "mem_type"),
        (["add", "x", "--scope", "global", "--trust", "total"], "trust"),
        (["add", "", "--scope", "global"], "content"),
        (["search", "x", "--limit", "0"], "limit"),
        (["search", "x", "--scope", "cross:"], "scope"),
        (["get-all", "--cursor", "nope"], "cursor"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_field(
    tmp_path: Path, args: list[str], field: str
) -> None:
    out = engram(tmp_path, *args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"engram: error: {field}:")


def test_a_secret_exits_2_and_is_not_echoed(tmp_path: Path) -> None:
    secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345"
    out = engram(tmp_path, "add", f"key is {secret}", "--scope", "global")
    assert out.returncode == 2
    assert secret not in out.stderr + out.stdout
    assert "credential" in out.stderr


def test_the_cli_acts_as_main_unless_told_otherwise(tmp_path: Path) -> None:
    denied = engram(tmp_path, "add", "ops note", "--scope", "agent:ops")
    assert denied.returncode == 2
    assert "agent 'main' cannot write to scope 'agent:ops'" in denied.stderr
    ok = engram(tmp_path, "add", "ops note", "--scope", "agent:ops", agent="devops")
    assert ok.returncode == 0, ok.stderr


def test_forget_and_restore_by_id(tmp_path: Path) -> None:
    added = json.loads(engram(tmp_path, "--json", "add", "temp fact", "--scope", "global").stdout)
    gone = engram(tmp_path, "--json", "forget", added["id"], "--reason", "wrong")
    assert json.loads(gone.stdout)["status"] == "archived"
    listing = json.loads(engram(tmp_path, "--json", "get-all").stdout)
    assert listing["total"] == 0
    back = engram(tmp_path, "--json", "restore-memory", added["id"])
    assert json.loads(back.stdout)["status"] == "restored"


def test_a_second_process_on_the_same_data_dir_fails_fast_with_a_clear_message(
    tmp_path: Path,
) -> None:
    lock = DataDirLock(tmp_path)
    lock.acquire()
    try:
        out = engram(tmp_path, "status")
    finally:
        lock.release()
    assert out.returncode == 1
    assert (
        f"data dir {tmp_path} is in use by another Engram process (pid {os.getpid()})" in out.stderr
    )


def test_an_invalid_setting_is_reported_by_key(tmp_path: Path) -> None:
    cfg = tmp_path / "engram.yaml"
    cfg.write_text("store:\n  mode: floppy\n")
    out = engram(tmp_path, "--config", str(cfg), "status")
    assert out.returncode == 2
    assert "store.mode (env ENGRAM_STORE__MODE)" in out.stderr

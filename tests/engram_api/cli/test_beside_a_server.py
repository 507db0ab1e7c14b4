"""The CLI beside a running `engram serve` / `engram stdio` on the embedded default: commands
go through the process that holds the data dir, and a second server names the holder."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engram_contract.report import parse_summary
from tests.engram_api.cli.test_memory_commands import engram


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(data: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "ENGRAM_DATA_DIR": str(data),
        "ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER": "hash",
    }
    env.pop("ENGRAM_CONFIG", None)
    return env


def wait_for(condition: object, what: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {within}s")
        time.sleep(0.05)


@contextlib.contextmanager
def running(
    data: Path, *command: str, port: int | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`engram serve` (or stdio) as a real process, until it has opened the data dir."""
    log = (data.parent / f"{command[0]}.log").open("wb")
    args = [sys.executable, "-m", "engram_api", *command]
    if port is not None:
        args += ["--port", str(port)]
    proc = subprocess.Popen(
        args, env=server_env(data), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
    )
    try:
        wait_for(
            lambda: proc.poll() is not None or (data / "engram.sock").exists(),
            "the server's control socket",
        )
        assert proc.poll() is None, (data.parent / f"{command[0]}.log").read_text()
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        log.close()


def ok_json(data: Path, *args: str) -> dict[str, object]:
    out = engram(data, "--json", *args)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_every_memory_command_runs_through_a_running_serve(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    with running(data, "serve", port=port):
        added = ok_json(data, "add", "Deploys happen on Tuesdays", "--scope", "global")
        assert added["status"] == "stored"
        ok_json(
            data, "add", "The user prefers dark mode", "--scope", "global", "--type", "preference"
        )
        # The server answers over MCP meanwhile: the same memory is visible there.
        found = ok_json(data, "search", "when do deploys happen")
        assert found["results"][0]["content"] == "Deploys happen on Tuesdays"  # type: ignore[index]
        listing = ok_json(data, "get-all", "--scope", "global")
        assert listing["total"] == 2
        status = ok_json(data, "status")
        assert status["active_memories"] == 2
        gone = ok_json(data, "forget", str(added["id"]), "--reason", "moved to Wednesdays")
        assert gone["status"] == "archived"
        http = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        assert http.status_code == 200

        # Bad input is refused by the server with the usual one line and exit code 2.
        bad = engram(data, "add", "x", "--scope", "nowhere")
        assert bad.returncode == 2
        assert bad.stderr.startswith("engram: error: scope:")
        assert "Traceback" not in bad.stderr

    # With nothing running, the CLI opens the store itself, as before, and sees it all.
    after = ok_json(data, "get-all", "--scope", "global", "--include-archived")
    assert after["total"] == 2


def test_maintenance_and_backup_run_through_a_running_serve(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running(data, "serve", port=free_port()):
        ok_json(data, "add", "The user prefers dark mode", "--scope", "global")
        ok_json(data, "add", "the user prefers dark mode.", "--scope", "global")
        daily = engram(data, "maintenance", "daily", "--summary-line")
        assert daily.returncode == 0, daily.stderr
        summary = parse_summary(daily.stdout)
        assert (summary.task.value, summary.result.value, summary.merged) == (
            "daily",
            "Succeeded",
            1,
        )
        backup = engram(data, "backup", "--summary-line")
        assert backup.returncode == 0, backup.stderr
        assert parse_summary(backup.stdout).result.value == "Succeeded"
    [export] = (tmp_path / "data-backups" / "memories").iterdir()
    assert (export / "manifest.json").is_file()


def test_commands_run_through_a_running_stdio_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running(data, "stdio"):
        added = ok_json(data, "add", "Bob owns billing", "--scope", "global")
        assert added["status"] == "stored"
        assert ok_json(data, "status")["active_memories"] == 1


def test_a_second_serve_names_the_holder_in_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    with running(data, "serve", port=port) as first:
        second = subprocess.run(
            [sys.executable, "-m", "engram_api", "serve", "--port", str(free_port())],
            env=server_env(data),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert first.poll() is None
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert f"in use by engram serve at http://127.0.0.1:{port}/mcp (pid {first.pid})" in lines[0]
    assert "Traceback" not in second.stderr


@pytest.mark.parametrize("command", ["reembed", "restore"])
def test_commands_that_need_the_data_dir_alone_say_who_holds_it(
    tmp_path: Path, command: str
) -> None:
    data = tmp_path / "data"
    ok_json(data, "add", "Bob owns billing", "--scope", "global")
    assert engram(data, "backup").returncode == 0
    [export] = (tmp_path / "data-backups" / "memories").iterdir()
    args = ["reembed", "--to", "hash/256"] if command == "reembed" else ["restore", str(export)]
    with running(data, "serve", port=free_port()) as first:
        out = engram(data, *args, "--force") if command == "restore" else engram(data, *args)
    assert out.returncode == 1
    assert "in use by engram serve" in out.stderr
    assert f"(pid {first.pid})" in out.stderr

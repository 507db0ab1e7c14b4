"""The maintenance CLI: summary line last on stdout and in the termination-message file."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_api.cli import main
from engram_contract.report import RunResult, parse_summary


def config(tmp_path: Path) -> Path:
    path = tmp_path / "engram.yaml"
    path.write_text("embeddings:\n  primary:\n    provider: hash\n")
    return path


def run(tmp_path: Path, *args: str) -> int:
    return main(["--config", str(config(tmp_path)), "--data-dir", str(tmp_path / "data"), *args])


def test_weekly_prints_the_summary_last_and_writes_the_termination_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    term = tmp_path / "termination-log"
    monkeypatch.setenv("ENGRAM_TERMINATION_MESSAGE_PATH", str(term))
    assert run(tmp_path, "add", "The user prefers dark mode", "--scope", "global") == 0
    assert run(tmp_path, "add", "the user prefers dark mode.", "--scope", "global") == 0
    capsys.readouterr()

    assert run(tmp_path, "maintenance", "weekly", "--summary-line") == 0

    out = capsys.readouterr().out.splitlines()
    summary = parse_summary(out[-1])
    assert out[-1].startswith("ENGRAM_SUMMARY ")
    assert (summary.task.value, summary.result, summary.merged) == (
        "weekly",
        RunResult.succeeded,
        1,
    )
    # Without an LLM only re-extraction is skipped: conflicts and consolidation run offline.
    assert set(summary.skipped_steps) == {"reextract"}
    assert parse_summary(term.read_text()) == summary


def test_backup_then_restore_into_a_new_collection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_TERMINATION_MESSAGE_PATH", str(tmp_path / "term"))
    assert run(tmp_path, "add", "Deploys happen on Tuesdays", "--scope", "global") == 0
    assert run(tmp_path, "backup", "--summary-line") == 0
    assert parse_summary(capsys.readouterr().out).task.value == "backup"
    # Backups live beside the data dir, not in it: wiping the data dir keeps them.
    [export] = (tmp_path / "data-backups" / "memories").iterdir()
    assert run(tmp_path, "restore", str(export)) == 1  # live data, no --force
    assert "--force" in capsys.readouterr().err
    assert run(tmp_path, "restore", str(export), "--collection", "copy") == 0
    assert "memories: 1" in capsys.readouterr().out


def test_a_run_that_cannot_start_still_reports_a_failed_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_TERMINATION_MESSAGE_PATH", str(tmp_path / "term"))
    monkeypatch.setenv("ENGRAM_STORE__MODE", "server")  # no URL configured
    assert run(tmp_path, "maintenance", "daily", "--summary-line") in (1, 2)
    summary = parse_summary((tmp_path / "term").read_text())
    assert summary.result is RunResult.failed
    assert "store.url" in summary.message

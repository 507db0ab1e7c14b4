"""A bad permission file is reported by file, line and rule, never by its text: a plaintext
token on the offending line must not reach the log, /readyz or a startup error."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engram_api.memory.policy import PolicyEngine
from engram_api.runtime import StartupError, load_permissions
from engram_api.server.metrics import Metrics
from engram_api.server.reload import PermissionWatcher
from engram_contract.permissions import builtin_permission_config

TOKEN = "engram_Zq8KplaintextTokenPastedByMistake0123"
BAD_FILES = {
    # A YAML syntax error on the very line that holds the token.
    "syntax": (f"agents:\n  alpha:\n    read: [global\n    token: {TOKEN}\n", "line 4"),
    "tab": (f"agents:\n\talpha: {TOKEN}\n", "line 2"),
    "pattern": (f"agents:\n  alpha:\n    read:\n      - global\n      - {TOKEN}\n", "line 3"),
    "hash": (f"agents:\n  alpha:\n    token_sha256: [{TOKEN}]\n", "line 3"),
    "agent name": (f"agents:\n  '{TOKEN}!':\n    read: [global]\n", "line 2"),
    "not utf-8": ("agents: {}\n# \udcff" + TOKEN, "not UTF-8"),
}


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_rejected_reload_names_file_line_and_rule_but_never_the_text(
    tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    text, where = BAD_FILES[case]
    path = _write(tmp_path / "permissions.yaml", text)
    watcher = PermissionWatcher(path, PolicyEngine(builtin_permission_config()), Metrics())
    assert watcher.check() is False
    error = watcher.status.last_error
    assert error.startswith(f"{path}: ")
    assert where in error
    assert TOKEN not in error
    assert "Zq8K" not in error
    assert all(TOKEN not in str(r.__dict__) for r in caplog.records)


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_file_at_startup_names_file_line_and_rule_but_never_the_text(
    tmp_path: Path, case: str
) -> None:
    text, where = BAD_FILES[case]
    path = _write(tmp_path / "permissions.yaml", text)
    with pytest.raises(StartupError) as raised:
        load_permissions(path)
    assert str(path) in str(raised.value)
    assert where in str(raised.value)
    assert "Zq8K" not in str(raised.value)

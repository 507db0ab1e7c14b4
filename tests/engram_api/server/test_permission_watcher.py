"""The permission watcher on its own: apply, reject once, recover, survive a missing file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engram_api.memory.policy import PolicyEngine
from engram_api.server.metrics import Metrics
from engram_api.server.reload import PermissionWatcher
from engram_contract.permissions import builtin_permission_config
from tests.engram_api.server.harness import token_config, write_config


def _watcher(path: Path) -> tuple[PermissionWatcher, PolicyEngine]:
    policy = PolicyEngine(builtin_permission_config())
    watcher = PermissionWatcher(path, policy, Metrics())
    watcher.prime()
    return watcher, policy


def test_priming_applies_the_file_as_it_is_now_without_counting_a_reload(tmp_path: Path) -> None:
    # The engine loaded an older version; the file changed before the watcher started.
    path = write_config(tmp_path / "p.yaml", token_config())
    policy = PolicyEngine(builtin_permission_config())
    metrics = Metrics()
    watcher = PermissionWatcher(path, policy, metrics)
    watcher.prime()
    assert set(policy.config.agents) == {"alpha", "beta", "ops"}
    assert b"engram_permission_reloads_total{" not in metrics.render()
    assert watcher.check() is False


def test_an_unchanged_file_is_not_reapplied(tmp_path: Path) -> None:
    path = write_config(tmp_path / "p.yaml", token_config())
    watcher, policy = _watcher(path)
    before = policy.config
    assert watcher.check() is False
    assert policy.config is before


def test_a_changed_file_replaces_the_active_config(tmp_path: Path) -> None:
    path = write_config(tmp_path / "p.yaml", token_config())
    watcher, policy = _watcher(path)
    changed = token_config()
    changed.agents["beta"].write = ["agent:beta", "global"]
    write_config(path, changed)
    assert watcher.check() is True
    assert policy.config.agents["beta"].write == ["agent:beta", "global"]


def test_a_bad_version_is_logged_once_and_the_good_one_stays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(tmp_path / "p.yaml", token_config())
    watcher, policy = _watcher(path)
    before = policy.config
    path.write_text("version: 2\n", encoding="utf-8")
    assert watcher.check() is False
    assert watcher.check() is False
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "unsupported permission config version 2" in watcher.status.last_error
    assert policy.config is before
    # Putting the good version back clears the complaint without a reload.
    write_config(path, token_config())
    assert watcher.check() is False
    assert watcher.status.last_error == ""


def test_a_missing_file_keeps_the_last_good_config(tmp_path: Path) -> None:
    path = write_config(tmp_path / "p.yaml", token_config())
    watcher, policy = _watcher(path)
    before = policy.config
    path.unlink()
    assert watcher.check() is False
    assert "cannot read" in watcher.status.last_error
    assert policy.config is before

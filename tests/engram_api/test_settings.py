"""Settings: YAML file under ENGRAM_* environment, every bad key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_api.settings import SettingsError, load_settings


def test_defaults_are_the_embedded_store_under_the_users_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ENGRAM_DATA_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    s = load_settings()
    assert s.store.mode == "embedded"
    assert s.data_dir == tmp_path / ".local" / "share" / "engram"
    assert s.embeddings.primary.provider == "local"
    assert s.server.host == "127.0.0.1"


def test_the_environment_overrides_the_yaml_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cfg = tmp_path / "engram.yaml"
    cfg.write_text("store:\n  collection: from-file\n  search_mode: dense\n")
    monkeypatch.setenv("ENGRAM_STORE__COLLECTION", "from-env")
    s = load_settings(cfg)
    assert s.store.collection == "from-env"
    assert s.store.search_mode == "dense"


def test_the_config_file_can_come_from_engram_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cfg = tmp_path / "engram.yaml"
    cfg.write_text("limits:\n  content_max_chars: 100\n")
    monkeypatch.setenv("ENGRAM_CONFIG", str(cfg))
    assert load_settings().limits.content_max_chars == 100


@pytest.mark.parametrize(
    ("yaml_text", "named"),
    [
        ("store:\n  mode: floppy\n", "store.mode (env ENGRAM_STORE__MODE)"),
        ("limits:\n  content_max_chars: 0\n", "limits.content_max_chars"),
        ("server:\n  port: 70000\n", "server.port"),
        ("colour: blue\n", "colour (env ENGRAM_COLOUR): unknown setting"),
        ("store:\n  collection: 'no spaces'\n", "store.collection"),
    ],
)
def test_bad_values_are_reported_by_key(tmp_path: Path, yaml_text: str, named: str) -> None:
    cfg = tmp_path / "engram.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(SettingsError, match=named.replace("(", r"\(").replace(")", r"\)")):
        load_settings(cfg)


def test_a_file_that_is_not_a_mapping_is_rejected(tmp_path: Path) -> None:
    cfg = tmp_path / "engram.yaml"
    cfg.write_text("- a\n- b\n")
    with pytest.raises(SettingsError, match="must be a mapping"):
        load_settings(cfg)


def test_a_missing_file_is_reported_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=str(tmp_path / "nope.yaml")):
        load_settings(tmp_path / "nope.yaml")


def test_api_keys_are_secret_and_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_STORE__API_KEY", "qdrant-key-123456")
    s = load_settings()
    assert s.store.api_key is not None
    assert "qdrant-key-123456" not in repr(s)
    assert s.store.api_key.get_secret_value() == "qdrant-key-123456"

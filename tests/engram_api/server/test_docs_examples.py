"""The copy-paste examples in docs/clients.md and docs/configuration.md are valid."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from engram_api.settings import EngramSettings
from engram_contract.permissions import load_permission_config

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _blocks(name: str, lang: str) -> list[str]:
    text = (DOCS / name).read_text(encoding="utf-8")
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_every_json_client_config_parses_and_points_at_mcp() -> None:
    blocks = _blocks("clients.md", "json")
    assert len(blocks) >= 5
    for block in blocks:
        servers = json.loads(block)["mcpServers"]
        engram = servers["engram"]
        if "url" in engram:
            assert engram["url"].endswith("/mcp")
        else:
            assert "stdio" in engram["args"] or "mcp-remote" in engram["args"]


def test_the_python_agent_example_compiles() -> None:
    [source] = _blocks("clients.md", "python")
    compile(source, "clients.md", "exec")
    assert "streamable_http_client" in source


def test_the_permission_file_example_is_a_valid_config() -> None:
    permission_blocks = [b for b in _blocks("configuration.md", "yaml") if "agents:" in b]
    config = load_permission_config(permission_blocks[0])
    assert set(config.agents) == {"main", "ci-bot", "devops"}
    assert config.uses_tokens()
    assert config.agents["ci-bot"].service_accounts[0].name == "ci-runner"


def test_the_settings_file_example_is_valid_settings() -> None:
    settings_block = next(b for b in _blocks("configuration.md", "yaml") if "server:" in b)
    settings = EngramSettings(**yaml.safe_load(settings_block))
    assert settings.server.host == "0.0.0.0"

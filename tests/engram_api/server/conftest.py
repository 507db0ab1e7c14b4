"""Fixtures for the MCP service tests: a hash embedder and a fresh data dir per test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.settings import EngramSettings, KubernetesAuthSettings, ServerSettings
from engram_contract.permissions import PermissionConfig
from tests.engram_api.server.harness import RunningServer, serve, token_config, write_config


@pytest.fixture(autouse=True)
def _clean_engram_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings come from each test alone, never from the developer's environment."""
    for key in list(os.environ):
        if key.startswith("ENGRAM_"):
            monkeypatch.delenv(key)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., EngramSettings]:
    def make(
        *,
        permissions: PermissionConfig | None = None,
        kubernetes: KubernetesAuthSettings | None = None,
        embeddings: EmbeddingSettings | None = None,
        **server: Any,
    ) -> EngramSettings:
        perm_file = None
        if permissions is not None:
            perm_file = write_config(tmp_path / "permissions.yaml", permissions)
        return EngramSettings(
            data_dir=tmp_path / "data",
            permissions_file=perm_file,
            embeddings=embeddings or EmbeddingSettings(primary=ProviderSettings(provider="hash")),
            server=ServerSettings(permissions_poll_s=0.05, readiness_probe_ttl_s=0, **server),
            kubernetes_auth=kubernetes or KubernetesAuthSettings(),
        )

    return make


@pytest.fixture
async def local_server(
    make_settings: Callable[..., EngramSettings],
) -> AsyncIterator[RunningServer]:
    """Local mode: built-in agents (main, devops), loopback, no tokens."""
    async with serve(make_settings()) as running:
        yield running


@pytest.fixture
async def token_server(
    make_settings: Callable[..., EngramSettings],
) -> AsyncIterator[RunningServer]:
    async with serve(make_settings(permissions=token_config())) as running:
        yield running

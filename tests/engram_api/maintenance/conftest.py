"""Maintenance runs against the real engine (both store kinds) with the hash embedder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engram_api.embeddings.base import Embedder
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.embeddings.local import LocalEmbedder
from engram_api.embeddings.whole import WholeTextEmbedder
from engram_api.runtime import Engine, open_engine
from engram_api.settings import EngramSettings, load_settings
from tests.engram_api.maintenance.helpers import FakeChat

MODES = ["embedded", "local-client"]


def make_settings(tmp_path: Path, mode: str = "embedded", **overrides: Any) -> EngramSettings:
    return load_settings(data_dir=tmp_path / "data", store={"mode": mode}, **overrides)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings_factory(tmp_path: Path, mode: str) -> Callable[..., EngramSettings]:
    def make(**overrides: Any) -> EngramSettings:
        return make_settings(tmp_path, mode, **overrides)

    return make


@pytest.fixture
async def engine(settings_factory: Callable[..., EngramSettings]) -> AsyncIterator[Engine]:
    async with open_engine(
        settings_factory(), background=False, embedder=HashingEmbedder(384)
    ) as e:
        yield e


@pytest.fixture
async def chat() -> AsyncIterator[FakeChat]:
    async with FakeChat() as c:
        yield c


class _Shared(WholeTextEmbedder):
    """Outlives the engines that use it (an engine closes its embedder on exit)."""

    async def aclose(self) -> None:
        return None


@pytest.fixture(scope="session")
def real_embedder() -> Iterator[Embedder]:
    """The real default model (whole-text wrapped, as the factory builds it), loaded once."""
    model = LocalEmbedder.load()
    yield _Shared(model)
    asyncio.run(model.aclose())

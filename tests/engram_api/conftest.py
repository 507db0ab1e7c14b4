"""Fixtures for engine tests: real stores (qdrant-edge and qdrant-client local mode)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.memory.guards import SecretGuard
from engram_api.memory.policy import PolicyEngine
from engram_api.memory.service import MemoryService
from engram_api.settings import LimitSettings
from engram_api.store.base import MemoryStore
from engram_contract.permissions import builtin_permission_config
from tests.engram_api.store_kinds import DIM, make_store


@pytest.fixture(params=["edge", "qdrant-client"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    s = make_store(request.param, tmp_path)
    await s.open(DIM)
    yield s
    await s.close()


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(DIM)


@pytest.fixture
async def service(store: MemoryStore, embedder: HashingEmbedder) -> AsyncIterator[MemoryService]:
    svc = MemoryService(
        store=store,
        embedder=embedder,
        policy=PolicyEngine(builtin_permission_config()),
        guard=SecretGuard(),
        limits=LimitSettings(),
    )
    yield svc
    await svc.aclose()

"""Fixtures for the operator tests: an emulated API server and the operator running against it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import kmock
import pytest

from engram_operator import rbac
from engram_operator.settings import OperatorSettings
from tests.engram_operator.kopf_harness import (
    Cluster,
    RunningOperator,
    StampingEmulator,
    StartOperator,
    declare_resources,
    eventually,
    make_settings,
)

WATCHED = {"engramagents", "engrammaintenances", "jobs"}


@pytest.fixture
def settings() -> OperatorSettings:
    return make_settings()


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with StampingEmulator() as emulator, kmock.Server(emulator):
        declare_resources(emulator)
        yield Cluster(emulator)


@pytest.fixture
async def start_operator(cluster: Cluster) -> AsyncIterator[StartOperator]:
    """Start the operator (optionally with other settings); stopped at teardown."""
    running: list[RunningOperator] = []

    async def start(settings: OperatorSettings | None = None, **kwargs: Any) -> RunningOperator:
        operator = RunningOperator(settings or make_settings(), cluster.url, **kwargs)
        running.append(operator)
        before = len(cluster.operator_requests())
        await operator.start()
        await eventually(
            lambda: cluster.watched(WATCHED, since=before),
            what="the operator watching its resources",
        )
        return operator

    yield start
    for operator in reversed(running):
        await operator.stop()
    # Every test that ran the operator also checks it stayed within its RBAC grants: group,
    # resource, verb, namespace and name (several operators: any one's grants). Where the
    # emulator enforced the grants, refused calls were the point of the test.
    if cluster.emulator.enforce is not None:
        return
    allowed: set[rbac.Permission] = set()
    for operator in running:
        allowed |= rbac.permissions(rbac.grants_for(operator.settings))
    denied = sorted((p for p in cluster.used_permissions() if not rbac.allows(allowed, p)), key=str)
    assert not denied, f"the operator made calls its RBAC grants do not allow: {denied}"


@pytest.fixture
async def operator(start_operator: StartOperator, settings: OperatorSettings) -> RunningOperator:
    return await start_operator(settings)

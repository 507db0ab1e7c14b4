"""Pytest fixtures for the fake APIs; a conftest imports the ones it needs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.clock import FakeClock
from tests.fakes.gemini_api import FakeGemini
from tests.fakes.openai_api import FakeOpenAI


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as api:
        yield api


@pytest.fixture
async def fake_gemini() -> AsyncIterator[FakeGemini]:
    async with FakeGemini() as api:
        yield api


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()

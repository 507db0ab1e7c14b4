"""Fixtures for the chart tests: one loaded chart and one render per scenario per session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import helm_python
import pytest

from .rendering import Rendered, ci_values, load_chart, render


@pytest.fixture(scope="session")
def chart() -> Iterator[helm_python.Chart]:
    loaded = load_chart()
    try:
        yield loaded
    finally:
        loaded.close()


@pytest.fixture(scope="session")
def scenario_values() -> dict[str, dict[str, Any]]:
    return ci_values()


@pytest.fixture(scope="session")
def rendered_scenario(
    chart: helm_python.Chart, scenario_values: dict[str, dict[str, Any]]
) -> Callable[[str], Rendered]:
    """Render a scenario ("default" or a ci/*.yaml stem) once and reuse it."""
    cache: dict[str, Rendered] = {}

    def get(name: str) -> Rendered:
        if name not in cache:
            cache[name] = render(chart, scenario_values[name])
        return cache[name]

    return get


@pytest.fixture(scope="session")
def default_render(rendered_scenario: Callable[[str], Rendered]) -> Rendered:
    return rendered_scenario("default")

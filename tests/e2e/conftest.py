"""Cluster end-to-end tests: opt-in, skipped unless ``--kube-context`` names a real cluster.

They cannot run in this repository's CI (no cluster, no Docker engine); they were written and
kept correct by reading. Run them against kind or k3d as docs/operations.md explains:

    .venv/bin/pytest tests/e2e --kube-context kind-engram --engram-image engram:dev

Pass the tests/e2e path explicitly: pytest registers these options only from the conftest
files it loads at start-up, and it loads this one when tests/e2e is on the command line.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import helm_python
import pytest

from .cluster import Cluster, Release, install_release


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("engram-e2e", "Engram cluster end-to-end tests")
    group.addoption(
        "--kube-context",
        default=None,
        help="kubeconfig context of a disposable cluster (kind/k3d); without it e2e tests skip",
    )
    group.addoption(
        "--engram-image",
        default="engram:dev",
        help="Engram image (repository:tag) already loaded into the cluster",
    )
    group.addoption(
        "--e2e-timeout",
        default=600,
        type=int,
        help="seconds to wait for the install and for each slow step",
    )


def _option(config: pytest.Config, name: str) -> object:
    # getoption raises for options never registered (this conftest loaded late): treat as unset.
    try:
        return config.getoption(name)
    except ValueError:
        return None


@pytest.fixture(scope="session")
def kube_context(pytestconfig: pytest.Config) -> str:
    context = _option(pytestconfig, "--kube-context")
    if not context:
        pytest.skip("cluster e2e: pass --kube-context (see docs/operations.md)")
    return str(context)


@pytest.fixture(scope="session")
def timeout_s(pytestconfig: pytest.Config) -> int:
    value = _option(pytestconfig, "--e2e-timeout")
    return int(value) if isinstance(value, int) else 600


@pytest.fixture(scope="session")
def engram_image(pytestconfig: pytest.Config) -> str:
    value = _option(pytestconfig, "--engram-image")
    return str(value) if value else "engram:dev"


@pytest.fixture(scope="session")
def cluster(kube_context: str, timeout_s: int) -> Cluster:
    return Cluster(context=kube_context, timeout_s=timeout_s)


@pytest.fixture(scope="session")
def release(
    cluster: Cluster, kube_context: str, engram_image: str, timeout_s: int
) -> Iterator[Release]:
    """The chart installed once, in a fresh namespace, removed afterwards."""
    namespace = f"engram-e2e-{uuid.uuid4().hex[:8]}"
    with helm_python.Config(kube_context=kube_context, namespace=namespace) as helm:
        installed = install_release(helm, cluster, namespace, engram_image, timeout_s)
        try:
            yield installed
        finally:
            helm.uninstall(installed.name, timeout=timeout_s, wait="watcher", ignore_not_found=True)
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

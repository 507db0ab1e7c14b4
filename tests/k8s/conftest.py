"""Fixtures for the tests on a real control plane (etcd + kube-apiserver + controller manager).

The session starts one control plane; every test gets its own namespace. Where the binaries
cannot be had (no Go toolchain, no npm) the tests skip with the reason, except on CI (CI=true),
where a missing control plane is a failure: that layer must run there.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from .clis import REPO, Clis
from .controlplane import ApiError, ControlPlane, running_control_plane, wait_for
from .hooks import helm_uninstall
from .operator_process import LocalOperator, start_operator
from .releases import Release, install

NAMESPACE_DELETE_TIMEOUT_S = 60.0
# What `helm install` labels a namespace with so PodSecurity enforces `restricted` in it.
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def _build_module() -> ModuleType:
    path = REPO / "tools" / "k8s" / "build.py"
    spec = importlib.util.spec_from_file_location("engram_k8s_build", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"real control plane unavailable on CI: {reason}", pytrace=False)
    pytest.skip(f"real control plane unavailable: {reason} (run `make k8s-tools`)")


@pytest.fixture(scope="session")
def k8s_bin_dir() -> Path:
    build = _build_module()
    # ENGRAM_K8S_BIN_DIR: binaries from elsewhere (same names), instead of the built cache.
    directory = Path(os.environ.get("ENGRAM_K8S_BIN_DIR") or build.bin_dir())
    if not build.missing(directory):
        return directory
    # `make test` builds first (target k8s-tools); a bare pytest run builds here, printing
    # progress to the terminal, unless told not to.
    if os.environ.get("ENGRAM_K8S_BUILD", "1") == "0":
        _unavailable(f"binaries missing in {directory} and ENGRAM_K8S_BUILD=0")
    try:
        subprocess.run([sys.executable, str(build.__file__)], check=True, stdout=sys.stderr)
    except (subprocess.CalledProcessError, OSError) as exc:
        _unavailable(f"tools/k8s/build.py failed ({exc})")
    if build.missing(directory):
        _unavailable(f"binaries missing in {directory}: {', '.join(build.missing(directory))}")
    return directory


@pytest.fixture(scope="session")
def control_plane(
    k8s_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    work = tmp_path_factory.mktemp("k8s")
    crds = sorted((REPO / "manifests" / "crds").glob("*.yaml"))
    with running_control_plane(k8s_bin_dir, work, crds) as plane:
        yield plane


@pytest.fixture(scope="session")
def clis(control_plane: ControlPlane, k8s_bin_dir: Path) -> Clis:
    home = control_plane.work_dir / "home"
    home.mkdir(exist_ok=True)
    return Clis(bin_dir=k8s_bin_dir, kubeconfig=control_plane.kubeconfig, home=home)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def namespace_gone(plane: ControlPlane, name: str) -> bool:
    return plane.api().get_or_none(f"/api/v1/namespaces/{name}") is None


def create_namespace(plane: ControlPlane, name: str, labels: dict[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    if labels:
        body["metadata"]["labels"] = labels  # type: ignore[index]
    plane.api().post("/api/v1/namespaces", body)


def delete_namespace(plane: ControlPlane, name: str, *, wait: bool = False) -> None:
    try:
        plane.api().delete(f"/api/v1/namespaces/{name}")
    except ApiError as exc:
        if exc.status != 404:
            raise
    if wait:
        try:
            wait_for(
                lambda: namespace_gone(plane, name),
                timeout=NAMESPACE_DELETE_TIMEOUT_S,
                what=f"namespace {name} to be deleted",
            )
        except TimeoutError as exc:
            status = (plane.api().get_or_none(f"/api/v1/namespaces/{name}") or {}).get("status")
            raise AssertionError(f"{exc}; its status: {status}") from None


@pytest.fixture
def make_namespace(control_plane: ControlPlane) -> Iterator[Callable[..., str]]:
    """Create namespaces (PodSecurity `restricted` enforced); deleted at teardown."""
    made: list[str] = []

    def make(prefix: str = "t", labels: dict[str, str] | None = None) -> str:
        name = unique(prefix)
        create_namespace(control_plane, name, {**RESTRICTED, **(labels or {})})
        made.append(name)
        # Pods need the `default` ServiceAccount, which the controller manager adds shortly.
        wait_for(
            lambda: control_plane.api().get_or_none(
                f"/api/v1/namespaces/{name}/serviceaccounts/default"
            ),
            timeout=30,
            what=f"the default ServiceAccount in {name}",
        )
        return name

    yield make
    for name in made:
        delete_namespace(control_plane, name)


@pytest.fixture
def namespace(make_namespace: Callable[..., str]) -> str:
    return make_namespace()


@pytest.fixture(scope="session")
def engram_crds(clis: Clis) -> None:
    """The Engram CRDs from manifests/crds (the chart's crds/ are checked to be the same)."""
    clis.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "manifests" / "crds")
    )
    clis.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/engramagents.engram.dev",
        "crd/engrammaintenances.engram.dev",
    )


@pytest.fixture(scope="session")
def release(control_plane: ControlPlane, clis: Clis) -> Iterator[Release]:
    namespace = unique("op")
    create_namespace(control_plane, namespace, RESTRICTED)
    name = unique("e")
    install(clis, name, namespace)
    yield Release(name=name, namespace=namespace, fullname=f"{name}-engram")
    helm_uninstall(control_plane, clis, name, namespace, control_plane.work_dir / "hooks" / name)
    delete_namespace(control_plane, namespace)


@pytest.fixture(scope="session")
def operator(
    control_plane: ControlPlane, release: Release, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalOperator]:
    running = start_operator(
        control_plane,
        namespace=release.namespace,
        fullname=release.fullname,
        work_dir=tmp_path_factory.mktemp("operator"),
    )
    yield running
    running.stop()

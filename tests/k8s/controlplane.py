"""A real Kubernetes control plane on loopback for tests, in the manner of controller-runtime's
envtest: etcd, kube-apiserver and kube-controller-manager as local processes, no kubelet.

The binaries come from tools/k8s/build.py (built once into a cache outside the tree). Certificates
are generated per run: one CA signs the serving certificate and the admin client certificate
(``system:masters``); a separate RSA key signs ServiceAccount tokens. The API server runs with
RBAC authorisation and the default admission chain (PodSecurity included); the controller manager
runs only the controllers the tests rely on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

T = TypeVar("T")

# Controllers the tests need: owner-reference GC, namespace deletion, the CronJob -> Job -> pod
# chain, ServiceAccounts and the CA ConfigMap that token volumes reference.
CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "cronjob-controller",
    "job-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    # Claims get the kubernetes.io/pvc-protection finalizer at admission; without this
    # controller nothing removes it and a namespace with a claim never deletes.
    "persistentvolumeclaim-protection-controller",
)
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0
RETRIES_429 = 10


class ControlPlaneError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(
    check: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.1
) -> T:
    """Poll ``check`` until it returns something other than None/False, at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = check()
        except Exception as exc:  # the condition may raise while the thing is not there yet
            last_error, value = exc, None
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(interval)


# Certificates --------------------------------------------------------------------------------


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _cert(
    subject: x509.Name,
    key: rsa.RSAPrivateKey,
    issuer: tuple[x509.Certificate, rsa.RSAPrivateKey] | None,
    *,
    ca: bool = False,
    sans: Sequence[x509.GeneralName] = (),
    usage: Sequence[x509.ObjectIdentifier] = (),
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    issuer_name, signer = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False),
            critical=True,
        )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _name(common: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


@dataclass(frozen=True)
class Pki:
    ca: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _cert(_name("engram-test-ca"), ca_key, None, ca=True)
    serving_key = _key()
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
    ]
    serving = _cert(
        _name("kube-apiserver"),
        serving_key,
        (ca, ca_key),
        sans=sans,
        usage=[x509.ExtendedKeyUsageOID.SERVER_AUTH],
    )
    admin_key = _key()
    admin = _cert(
        _name("engram-test-admin", "system:masters"),
        admin_key,
        (ca, ca_key),
        usage=[x509.ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    sa_key = _key()
    files = {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "apiserver.crt": serving.public_bytes(serialization.Encoding.PEM),
        "apiserver.key": _pem_key(serving_key),
        "admin.crt": admin.public_bytes(serialization.Encoding.PEM),
        "admin.key": _pem_key(admin_key),
        "sa.key": _pem_key(sa_key),
        "sa.pub": sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
        (directory / name).chmod(0o600)
    d = directory
    return Pki(
        d / "ca.crt",
        d / "apiserver.crt",
        d / "apiserver.key",
        d / "admin.crt",
        d / "admin.key",
        d / "sa.key",
        d / "sa.pub",
    )


# Processes -----------------------------------------------------------------------------------


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def check_alive(self) -> None:
        code = self.popen.poll()
        if code is not None:
            raise ControlPlaneError(f"{self.name} exited with {code}:\n{self.tail()}")

    def stop(self) -> None:
        if self.popen.poll() is not None:
            return
        # Each process leads its own session: signal the group so nothing it started survives.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(STOP_TIMEOUT_S)


def start_process(
    name: str, argv: Sequence[str], log_dir: Path, env: Mapping[str, str] | None = None
) -> Process:
    log = log_dir / f"{name}.log"
    handle = log.open("wb")
    try:
        popen = subprocess.Popen(
            list(argv),
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    finally:
        handle.close()
    return Process(name, popen, log)


# The API -------------------------------------------------------------------------------------


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else str(body)[:300]
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status
        self.body = body
        self.message = str(message)


class Api:
    """A thin JSON client over httpx (the tests speak paths and dicts, like kubectl --raw)."""

    def __init__(
        self,
        server: str,
        ca: Path,
        *,
        cert: tuple[Path, Path] | None = None,
        token: str | None = None,
        impersonate: str | None = None,
        impersonate_groups: Sequence[str] = (),
    ) -> None:
        headers: list[tuple[str, str]] = []
        if token:
            headers.append(("Authorization", f"Bearer {token}"))
        if impersonate:
            headers.append(("Impersonate-User", impersonate))
            headers += [("Impersonate-Group", group) for group in impersonate_groups]
        context = ssl.create_default_context(cafile=str(ca))
        if cert:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        self._client = httpx.Client(base_url=server, verify=context, headers=headers, timeout=30.0)

    def close(self) -> None:
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        # 429 "storage is (re)initializing" right after a CRD is created: the server says
        # when to come back (Retry-After), as client-go's retries honour it.
        for _ in range(RETRIES_429):
            response = self._client.request(
                method,
                path,
                params=params,
                content=json.dumps(body) if body is not None else None,
                headers={"Content-Type": content_type} if body is not None else None,
            )
            if response.status_code != 429:
                break
            time.sleep(min(float(response.headers.get("Retry-After") or 1), 2.0))
        try:
            data = response.json()
        except ValueError:
            data = response.text
        if response.status_code >= 400:
            raise ApiError(method, path, response.status_code, data)
        return data

    def get(self, path: str, **params: str) -> Any:
        return self.request("GET", path, params=params or None)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def post(self, path: str, body: Any, **params: str) -> Any:
        return self.request("POST", path, body, params=params or None)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)


# The control plane ---------------------------------------------------------------------------


@dataclass
class ControlPlane:
    bin_dir: Path
    work_dir: Path
    # CRDs created before the controller manager starts, like envtest's CRDInstallOptions: its
    # garbage collector then watches their kinds from the start instead of finding them at its
    # next discovery pass (30 s later), which is when owner deletions would first be seen.
    crds: Sequence[Path] = ()
    processes: list[Process] = field(default_factory=list)
    server: str = ""
    pki: Pki | None = None
    kubeconfig: Path = Path()
    admin: Api | None = None

    # Start / stop ------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        logs = self.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.pki = pki = make_pki(self.work_dir / "pki")
        etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{etcd_peer}"
        etcd = start_process(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=engram-test",
                f"--data-dir={self.work_dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=engram-test={peer_url}",
                # A throwaway store: durability only costs time here.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            logs,
        )
        self.processes.append(etcd)
        self.server = f"https://127.0.0.1:{api_port}"
        apiserver = start_process(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--cert-dir={self.work_dir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca}",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=RBAC",
                # As on real clusters: privileged pods are refused by PodSecurity, not earlier.
                "--allow-privileged=true",
                "--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,PodSecurity,"
                "DefaultTolerationSeconds,ResourceQuota,MutatingAdmissionWebhook,"
                "ValidatingAdmissionWebhook,ValidatingAdmissionPolicy",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                "--v=1",
            ],
            logs,
        )
        self.processes.append(apiserver)
        self.kubeconfig = self.write_kubeconfig(
            self.work_dir / "admin.kubeconfig",
            user={"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
        )
        self.admin = Api(self.server, pki.ca, cert=(pki.admin_cert, pki.admin_key))

        def ready() -> bool:
            for proc in (etcd, apiserver):
                proc.check_alive()
            assert self.admin is not None
            return bool(self.admin.get("/readyz") == "ok")

        self._wait(ready, "kube-apiserver /readyz")
        self._install_crds()
        kcm = start_process(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca}",
                "--use-service-account-credentials=false",
                f"--secure-port={free_port()}",
                "--bind-address=127.0.0.1",
                f"--cert-dir={self.work_dir / 'kcm-certs'}",
                # Quick namespace and garbage-collector passes, so deletions finish fast.
                "--concurrent-gc-syncs=5",
                "--v=1",
            ],
            logs,
        )
        self.processes.append(kcm)
        # The ServiceAccount controller is working once it has made `default` in `default`.
        self._wait(
            lambda: self._alive_and(
                lambda: self.api().get_or_none("/api/v1/namespaces/default/serviceaccounts/default")
            ),
            "kube-controller-manager (the default ServiceAccount)",
        )

    def _install_crds(self) -> None:
        api = self.api()
        names = []
        for path in self.crds:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
                    names.append(doc["metadata"]["name"])

        def established(name: str) -> bool:
            crd = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = (crd.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        for name in names:
            self._wait(lambda name=name: established(name), f"CRD {name} Established")

    def _alive_and(self, check: Callable[[], T]) -> T:
        for proc in self.processes:
            proc.check_alive()
        return check()

    def _wait(self, check: Callable[[], Any], what: str) -> None:
        try:
            wait_for(check, timeout=START_TIMEOUT_S, what=what, interval=0.2)
        except TimeoutError as exc:
            tails = "\n".join(f"--- {p.name}:\n{p.tail()}" for p in self.processes)
            raise ControlPlaneError(f"{exc}\n{tails}") from None

    def stop(self) -> None:
        if self.admin is not None:
            self.admin.close()
            self.admin = None
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()

    # Access ------------------------------------------------------------------------------

    def api(self) -> Api:
        if self.admin is None:
            raise ControlPlaneError("the control plane is not running")
        return self.admin

    def write_kubeconfig(
        self, path: Path, *, user: Mapping[str, str], namespace: str = "default"
    ) -> Path:
        assert self.pki is not None
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "engram-test",
                    "cluster": {"server": self.server, "certificate-authority": str(self.pki.ca)},
                }
            ],
            "users": [{"name": "user", "user": dict(user)}],
            "contexts": [
                {
                    "name": "engram-test",
                    "context": {"cluster": "engram-test", "user": "user", "namespace": namespace},
                }
            ],
            "current-context": "engram-test",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def token_for(
        self,
        namespace: str,
        service_account: str,
        *,
        audiences: Sequence[str] = (),
        seconds: int = 3600,
    ) -> str:
        """A ServiceAccount token from the TokenRequest API (what a projected volume holds)."""
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if audiences:
            spec["audiences"] = list(audiences)
        answer = self.api().post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        token: str = answer["status"]["token"]
        return token

    def service_account_kubeconfig(self, path: Path, namespace: str, service_account: str) -> Path:
        token = self.token_for(namespace, service_account)
        return self.write_kubeconfig(path, user={"token": token}, namespace=namespace)

    def as_service_account(self, namespace: str, service_account: str) -> Api:
        """The admin client impersonating a ServiceAccount (RBAC checks that account)."""
        assert self.pki is not None
        return Api(
            self.server,
            self.pki.ca,
            cert=(self.pki.admin_cert, self.pki.admin_key),
            impersonate=f"system:serviceaccount:{namespace}:{service_account}",
            impersonate_groups=(
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
                "system:authenticated",
            ),
        )


@contextlib.contextmanager
def running_control_plane(
    bin_dir: Path, work_dir: Path, crds: Sequence[Path] = ()
) -> Iterator[ControlPlane]:
    plane = ControlPlane(bin_dir=bin_dir, work_dir=work_dir, crds=crds)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()

"""Settings and the ``python -m engram_operator`` entry point."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest
from pydantic import ValidationError

from engram_operator.__main__ import main
from engram_operator.kube import CONFIGMAPS, ENGRAM_AGENTS
from engram_operator.settings import OperatorSettings, settings_problems
from tests.engram_operator.kopf_harness import Cluster, eventually, make_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("ENGRAM_OPERATOR_") or name == "POD_NAMESPACE":
            monkeypatch.delenv(name)
    return monkeypatch


def test_settings_come_from_prefixed_environment_variables(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ENGRAM_OPERATOR_IMAGE", "registry.example/engram:2")
    clean_env.setenv("ENGRAM_OPERATOR_CONFIGMAP_NAMESPACE", "engram")
    clean_env.setenv("ENGRAM_OPERATOR_NAMESPACES", "team-b, team-a,team-b")
    clean_env.setenv("ENGRAM_OPERATOR_BACKUP_PVC", "engram-backups")
    clean_env.setenv("ENGRAM_OPERATOR_RESYNC_SECONDS", "60")
    settings = OperatorSettings()  # type: ignore[call-arg]
    assert settings.image == "registry.example/engram:2"
    # The release namespace (the ConfigMap's) is always watched.
    assert settings.namespaces == ["engram", "team-a", "team-b"]
    assert not settings.clusterwide
    assert settings.backup_pvc == "engram-backups"
    assert settings.resync_seconds == 60
    assert settings.configmap_name == "engram-permissions"
    assert settings.health_port == 8080


def test_the_configmap_namespace_falls_back_to_the_pods_own(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ENGRAM_OPERATOR_IMAGE", "engram:1")
    clean_env.setenv("POD_NAMESPACE", "engram-system")
    settings = OperatorSettings()  # type: ignore[call-arg]
    assert settings.configmap_namespace == "engram-system"
    # Least privilege by default: the release namespace only; every namespace only if asked.
    assert settings.namespaces == ["engram-system"]
    assert not settings.clusterwide
    clean_env.setenv("ENGRAM_OPERATOR_WATCH_ALL", "true")
    assert OperatorSettings().clusterwide  # type: ignore[call-arg]
    clean_env.setenv("ENGRAM_OPERATOR_CONFIGMAP_NAMESPACE", "elsewhere")
    assert OperatorSettings().configmap_namespace == "elsewhere"  # type: ignore[call-arg]


def test_the_job_namespace_is_the_pods_own_unless_set(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ENGRAM_OPERATOR_IMAGE", "engram:1")
    clean_env.setenv("ENGRAM_OPERATOR_CONFIGMAP_NAMESPACE", "engram")
    # Outside a pod, without the variable: where the permission ConfigMap is.
    assert OperatorSettings().job_namespace == "engram"  # type: ignore[call-arg]
    clean_env.setenv("POD_NAMESPACE", "engram-system")
    assert OperatorSettings().job_namespace == "engram-system"  # type: ignore[call-arg]
    clean_env.setenv("ENGRAM_OPERATOR_JOB_NAMESPACE", "maintenance")
    assert OperatorSettings().job_namespace == "maintenance"  # type: ignore[call-arg]


def test_job_secrets_come_from_comma_separated_variables(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ENGRAM_OPERATOR_IMAGE", "engram:1")
    clean_env.setenv("POD_NAMESPACE", "engram")
    clean_env.setenv("ENGRAM_OPERATOR_JOB_ENV_SECRET", "engram-qdrant")
    clean_env.setenv("ENGRAM_OPERATOR_JOB_ENV_SECRETS", "team-keys, engram-qdrant")
    clean_env.setenv(
        "ENGRAM_OPERATOR_JOB_SECRET_ENV",
        "ENGRAM_LLM__PRIMARY__API_KEY=llm:api-key, ENGRAM_EMBEDDINGS__PRIMARY__API_KEY=emb:k",
    )
    settings = OperatorSettings()  # type: ignore[call-arg]
    assert settings.job_env_secret_names == ["engram-qdrant", "team-keys"]
    assert [tuple(ref) for ref in settings.job_secret_env] == [
        ("ENGRAM_LLM__PRIMARY__API_KEY", "llm", "api-key"),
        ("ENGRAM_EMBEDDINGS__PRIMARY__API_KEY", "emb", "k"),
    ]
    clean_env.setenv("ENGRAM_OPERATOR_JOB_SECRET_ENV", "")
    assert OperatorSettings().job_secret_env == []  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("ENGRAM_LLM__PRIMARY__API_KEY", "an entry is not VARIABLE=secret:key"),
        ("1BAD=gemini-key:k", "an entry is not VARIABLE=secret:key"),
        ("ENGRAM_LLM__PRIMARY__API_KEY=gemini-key", "API_KEY: expected VARIABLE=secret:key"),
        ("ENGRAM_X=Gemini_Key:k", "ENGRAM_X: the Secret name is not valid"),
        ("ENGRAM_X=gemini-key:a/b", "ENGRAM_X: the Secret key is not valid"),
        ("ENGRAM_X=a:k,ENGRAM_X=b:k", "ENGRAM_X is given twice"),
        ("ENGRAM_DATA_DIR=a:k", "ENGRAM_DATA_DIR is set by the operator itself"),
        ("ENGRAM_MAINTENANCE__BACKUP__KEEP=a:k", "is set by the operator itself"),
    ],
)
def test_bad_secret_env_references_are_refused(value: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        make_settings(job_secret_env=value)


@pytest.mark.parametrize(
    "mistake",
    [
        "sk-live-AbC123",
        "ENGRAM_LLM__PRIMARY__API_KEY=sk-live-AbC123",
        "ENGRAM_LLM__PRIMARY__API_KEY=gemini:sk-live/AbC123",
        "ENGRAM_LLM__PRIMARY__API_KEY=sk-live:AbC123=",
    ],
)
def test_a_key_put_in_the_setting_by_mistake_is_not_echoed(mistake: str) -> None:
    # main() prints settings_problems(), never the ValidationError itself (which has inputs).
    with pytest.raises(ValidationError) as caught:
        make_settings(job_secret_env=mistake)
    (problem,) = settings_problems(caught.value)
    assert problem.startswith("job_secret_env (ENGRAM_OPERATOR_JOB_SECRET_ENV): ")
    assert "AbC123" not in problem


def test_bad_env_secret_names_are_refused() -> None:
    with pytest.raises(ValueError, match="'Team_Keys' is not a Secret name"):
        make_settings(job_env_secrets="ok-keys,Team_Keys")


def test_main_names_each_bad_setting_by_its_variable(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("ENGRAM_OPERATOR_NAMESPACES", "team-a,team-*")
    clean_env.setenv("ENGRAM_OPERATOR_JOB_SECRET_ENV", "ENGRAM_LLM__PRIMARY__API_KEY=llm")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "ENGRAM_OPERATOR_IMAGE): Field required" in err
    assert "ENGRAM_OPERATOR_CONFIGMAP_NAMESPACE or POD_NAMESPACE): Field required" in err
    assert "'team-*' is not a namespace name (globs are not supported)" in err
    assert "job_secret_env (ENGRAM_OPERATOR_JOB_SECRET_ENV): " in err
    assert "ENGRAM_LLM__PRIMARY__API_KEY: expected VARIABLE=secret:key" in err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_the_entry_point_runs_from_a_kubeconfig_serves_healthz_and_stops_on_sigterm(
    cluster: Cluster, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kmock", "cluster": {"server": cluster.url}}],
                "users": [{"name": "nobody", "user": {}}],
                "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "nobody"}}],
                "current-context": "kmock",
            }
        ),
        encoding="utf-8",
    )
    port = _free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "KUBECONFIG": str(kubeconfig),
        "POD_NAMESPACE": "engram",
        "ENGRAM_OPERATOR_IMAGE": "registry.example/engram:1",
        "ENGRAM_OPERATOR_HEALTH_HOST": "127.0.0.1",
        "ENGRAM_OPERATOR_HEALTH_PORT": str(port),
        "ENGRAM_OPERATOR_NAMESPACES": "team-a",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "engram_operator",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await eventually(
            lambda: cluster.watched({"engramagents", "engrammaintenances", "jobs"}),
            within=20,
            what="the operator process watching",
        )
        await cluster.create(
            ENGRAM_AGENTS,
            "team-a",
            {
                "metadata": {"name": "main"},
                "spec": {
                    "read": ["global"],
                    "identity": {"token": {"enabled": True}},
                    "release": "engram/engram",
                },
            },
        )

        async def configured() -> bool:
            cm = await cluster.get(CONFIGMAPS, "engram", "engram-permissions")
            return cm is not None and "main:" in cm["data"]["permissions.yaml"]

        await eventually(configured, what="the agent in the ConfigMap")
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/healthz") as response,
        ):
            assert response.status == 200
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    lines = [line for line in (stdout + stderr).decode().splitlines() if line.strip()]
    assert lines, "the operator logged nothing"
    records = [json.loads(line) for line in lines]  # structured (JSON) logs only
    assert any(
        "Created ConfigMap engram/engram-permissions" in r.get("message", "") for r in records
    )

"""Every setting the chart passes is one the service or the operator actually reads.

pydantic-settings ignores environment variables that match no field, so a misspelt or renamed
ENGRAM_* variable would be silently dropped. These tests parse the rendered environment with
the real settings classes.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import helm_python
import pytest
from pydantic import BaseModel

from engram_api.settings import EngramSettings
from engram_operator.builders import Owner, build_cronjob
from engram_operator.models import parse_maintenance_spec
from engram_operator.settings import OperatorSettings

from .rendering import Obj, Rendered, render

# Every optional feature on, so every variable the chart can emit is rendered.
EVERYTHING_ON: dict[str, Any] = {
    "embeddings": {
        "primary": {
            "provider": "openai",
            "model": "text-embedding-3-small",
            "dimension": 384,
            "baseUrl": "https://llm.example.com/v1",
            "apiKeySecret": {"name": "oa", "key": "k"},
        },
        "fallback": {"provider": "local", "apiKeySecret": {"name": "", "key": "k"}},
    },
    "llm": {
        "provider": "gemini",
        "model": "gemini-2.5-flash",
        "baseUrl": "https://llm.example.com/v1",
        "apiKeySecret": {"name": "gm", "key": "k"},
    },
    "mcp": {"allowedHosts": ["engram.example.com"], "maxRequestBytes": 2097152},
    "extraEnv": [{"name": "ENGRAM_MAINTENANCE__BACKUP__KEEP", "value": "14"}],
    "operator": {"watchNamespaces": ["agents-a", "agents-b"]},
}


def _unwrap(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``Model`` or ``Model | None``, else None."""
    candidates = (
        typing.get_args(annotation)
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else (annotation,)
    )
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _is_setting(model: type[BaseModel], env_name: str, prefix: str, delimiter: str) -> bool:
    parts = env_name.removeprefix(prefix).lower().split(delimiter)
    current: type[BaseModel] | None = model
    for index, part in enumerate(parts):
        if current is None or part not in current.model_fields:
            return False
        annotation = current.model_fields[part].annotation
        current = _unwrap(annotation) if index < len(parts) - 1 else None
    return True


def _env(container: Obj, rendered: Rendered) -> dict[str, str]:
    """The container's environment as the kubelet would build it (Secrets get stand-ins)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(rendered.get("ConfigMap", source["configMapRef"]["name"])["data"])
        else:
            env["ENGRAM_STORE__API_KEY"] = "stand-in-qdrant-key"
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        elif "secretKeyRef" in item["valueFrom"]:
            env[item["name"]] = "stand-in-secret"
        else:
            env[item["name"]] = "engram"  # fieldRef metadata.namespace
    return env


def _use_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], prefix: str) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(prefix) or name == "POD_NAMESPACE":
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def everything(chart: helm_python.Chart) -> Rendered:
    return render(chart, EVERYTHING_ON)


def _mcp_container(rendered: Rendered) -> Obj:
    container: Obj = rendered.get("StatefulSet", "engram")["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


def _operator_container(rendered: Rendered) -> Obj:
    container: Obj = rendered.get("Deployment", "engram-operator")["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


def test_every_engram_variable_of_the_service_is_a_service_setting(everything: Rendered) -> None:
    env = _env(_mcp_container(everything), everything)
    unknown = [
        name
        for name in env
        if name.startswith("ENGRAM_") and not _is_setting(EngramSettings, name, "ENGRAM_", "__")
    ]
    assert not unknown, f"the service ignores {unknown}"


def test_the_service_settings_accept_the_rendered_environment(
    everything: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_env(monkeypatch, _env(_mcp_container(everything), everything), "ENGRAM_")
    settings = EngramSettings()
    assert settings.store.mode == "server"
    assert settings.store.url == "http://engram-qdrant.engram.svc:6333"
    assert settings.store.api_key is not None
    assert settings.server.host == "0.0.0.0"
    assert settings.server.port == 8765
    assert settings.server.allowed_hosts == ["engram.example.com"]
    assert settings.kubernetes_auth.enabled is True
    assert str(settings.permissions_file) == "/etc/engram/permissions/permissions.yaml"
    assert settings.embeddings.primary.provider == "openai"
    assert settings.embeddings.primary.dimension == 384
    assert settings.embeddings.fallback is not None
    assert settings.maintenance.backup.keep == 14


def test_the_service_starts_from_the_default_environment(
    default_render: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_env(monkeypatch, _env(_mcp_container(default_render), default_render), "ENGRAM_")
    settings = EngramSettings()
    assert settings.store.mode == "server"
    assert settings.embeddings.primary.provider == "local"
    assert settings.kubernetes_auth.audience == "engram"
    assert settings.server.insecure_no_auth is False


def _operator_settings(rendered: Rendered, monkeypatch: pytest.MonkeyPatch) -> OperatorSettings:
    _use_env(monkeypatch, _env(_operator_container(rendered), rendered), "ENGRAM_OPERATOR_")
    # Required fields come from the environment set above.
    return OperatorSettings()  # type: ignore[call-arg]


def _job_container(rendered: Rendered, monkeypatch: pytest.MonkeyPatch) -> Obj:
    """The container the operator would run for a maintenance, built by the real builder from
    the settings the chart gives it."""
    settings = _operator_settings(rendered, monkeypatch)
    owner = Owner("engram.dev/v1alpha1", "EngramMaintenance", "engram-weekly", "engram", "uid")
    spec = parse_maintenance_spec({"task": "weekly", "schedule": "0 4 * * 0"}, resource_name="x")
    cronjob = build_cronjob(owner=owner, spec=spec, settings=settings)
    container: Obj = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    return container


def _secret_refs(container: Obj) -> list[Obj]:
    return [e for e in container.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})]


def test_maintenance_jobs_get_a_complete_service_configuration(
    everything: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_container = _job_container(everything, monkeypatch)
    _use_env(monkeypatch, _env(job_container, everything), "ENGRAM_")
    settings = EngramSettings()
    assert settings.store.url == "http://engram-qdrant.engram.svc:6333"
    assert settings.store.api_key is not None
    assert str(settings.data_dir) == "/var/lib/engram"
    # The provider keys: a Job with an OpenAI embedder or a Gemini LLM has its key.
    assert settings.embeddings.primary.provider == "openai"
    assert settings.embeddings.primary.api_key is not None
    assert settings.llm.primary.provider == "gemini"
    assert settings.llm.primary.api_key is not None


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param({}, [], id="defaults"),
        pytest.param(
            EVERYTHING_ON,
            [
                ("ENGRAM_EMBEDDINGS__PRIMARY__API_KEY", "oa", "k"),
                ("ENGRAM_LLM__PRIMARY__API_KEY", "gm", "k"),
            ],
            id="everything",
        ),
        pytest.param(
            {
                "embeddings": {
                    "primary": {"provider": "gemini", "apiKeySecret": {"name": "g", "key": "a"}},
                    "fallback": {"provider": "openai", "apiKeySecret": {"name": "o", "key": "b"}},
                },
                "llm": {"provider": "openai", "apiKeySecret": {"name": "o", "key": "c"}},
            },
            [
                ("ENGRAM_EMBEDDINGS__FALLBACK__API_KEY", "o", "b"),
                ("ENGRAM_EMBEDDINGS__PRIMARY__API_KEY", "g", "a"),
                ("ENGRAM_LLM__PRIMARY__API_KEY", "o", "c"),
            ],
            id="fallback-and-shared-secret",
        ),
        pytest.param(
            {"llm": {"provider": "gemini", "apiKeySecret": {"name": "", "key": "api-key"}}},
            [],
            id="provider-without-secret",
        ),
    ],
)
def test_maintenance_jobs_reference_the_same_provider_keys_as_the_service(
    chart: helm_python.Chart,
    values: dict[str, Any],
    expected: list[tuple[str, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rendered = render(chart, values)
    job_refs = _secret_refs(_job_container(rendered, monkeypatch))
    assert job_refs == _secret_refs(_mcp_container(rendered))
    assert [
        (e["name"], e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in job_refs
    ] == expected


def test_provider_keys_pass_through_the_operator_as_names_only(everything: Rendered) -> None:
    operator = _operator_container(everything)
    by_name = {e["name"]: e for e in operator["env"]}
    assert by_name["ENGRAM_OPERATOR_JOB_SECRET_ENV"]["value"] == (
        "ENGRAM_EMBEDDINGS__PRIMARY__API_KEY=oa:k,ENGRAM_LLM__PRIMARY__API_KEY=gm:k"
    )
    # The chart never reads the provider Secrets: no lookup, no key material anywhere.
    for obj in everything.objects:
        if obj["kind"] in {"ConfigMap", "Secret"}:
            assert obj["metadata"]["name"] not in {"oa", "gm"}


def test_every_operator_variable_is_an_operator_setting(everything: Rendered) -> None:
    env = _env(_operator_container(everything), everything)
    fields = OperatorSettings.model_fields
    unknown = [
        name
        for name in env
        if name.startswith("ENGRAM_OPERATOR_")
        and name.removeprefix("ENGRAM_OPERATOR_").lower() not in fields
    ]
    assert not unknown, f"the operator ignores {unknown}"


def test_the_operator_settings_accept_the_rendered_environment(
    everything: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _operator_settings(everything, monkeypatch)
    mcp_pod = everything.get("StatefulSet", "engram")["spec"]["template"]["spec"]
    assert settings.namespaces == ["agents-a", "agents-b", "engram"]
    assert settings.configmap_name == "engram-permissions"
    assert settings.configmap_namespace == "engram"
    assert settings.image == _mcp_container(everything)["image"]
    assert settings.image_pull_policy == "IfNotPresent"
    assert settings.job_uid == mcp_pod["securityContext"]["runAsUser"]
    assert settings.job_service_account == "engram-maintenance"
    assert settings.job_env_configmap == "engram-env"
    assert settings.job_env_secret_names == ["engram-qdrant"]
    assert settings.job_namespace == "engram"
    assert [tuple(ref) for ref in settings.job_secret_env] == [
        ("ENGRAM_EMBEDDINGS__PRIMARY__API_KEY", "oa", "k"),
        ("ENGRAM_LLM__PRIMARY__API_KEY", "gm", "k"),
    ]
    assert settings.backup_pvc == "engram-backups"
    assert settings.health_port == 8080

"""Every pod the chart runs meets the "restricted" Pod Security Standard; secrets stay secret."""

from __future__ import annotations

import base64
from collections.abc import Callable

import helm_python
import pytest

from .rendering import Rendered, ci_values, containers, pod_specs, render

SCENARIOS = tuple(ci_values())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_pod_template_has_the_restricted_security_context(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    pods = list(pod_specs(rendered_scenario(scenario)))
    assert pods
    for where, _meta, spec in pods:
        pod_sc = spec.get("securityContext", {})
        assert pod_sc.get("runAsNonRoot") is True, where
        assert pod_sc.get("runAsUser", 0) > 0, where
        assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", where
        assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), where
        for container in containers(spec):
            sc = container.get("securityContext", {})
            name = f"{where} container {container['name']}"
            assert sc.get("allowPrivilegeEscalation") is False, name
            assert sc.get("readOnlyRootFilesystem") is True, name
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], name
            assert not sc.get("capabilities", {}).get("add"), name
            assert sc.get("privileged") is not True, name
            assert sc.get("runAsUser", pod_sc["runAsUser"]) != 0, name
            seccomp = sc.get("seccompProfile", pod_sc["seccompProfile"])
            assert seccomp["type"] == "RuntimeDefault", name


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_container_requests_cpu_and_memory_and_caps_memory(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    for where, _meta, spec in pod_specs(rendered_scenario(scenario)):
        for container in containers(spec):
            resources = container.get("resources", {})
            assert {"cpu", "memory"} <= set(resources.get("requests", {})), where
            assert "memory" in resources.get("limits", {}), where


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_writable_paths_are_volumes_because_the_root_filesystem_is_read_only(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    for where, _meta, spec in pod_specs(rendered_scenario(scenario)):
        for container in containers(spec):
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts, f"{where}: /tmp is not writable"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_only_the_operator_and_kubernetes_auth_get_an_api_token(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    rendered = rendered_scenario(scenario)
    for where, meta, spec in pod_specs(rendered):
        component = meta["labels"]["app.kubernetes.io/component"]
        automount = spec.get("automountServiceAccountToken")
        if component in ("operator", "uninstall"):
            # The uninstall hook deletes the release's custom resources (its own Roles only).
            assert automount is True, where
        elif component == "mcp":
            mcp = next(c for c in spec["containers"] if c["name"] == "engram")
            k8s_auth = any(
                e == {"name": "ENGRAM_KUBERNETES_AUTH__ENABLED", "value": "true"}
                for e in mcp["env"]
            )
            assert automount is k8s_auth, where
        else:
            assert automount is False, where


def test_provider_keys_come_only_from_existing_secrets(chart: helm_python.Chart) -> None:
    rendered = render(
        chart,
        {
            "embeddings": {
                "primary": {"provider": "openai", "apiKeySecret": {"name": "oa", "key": "k1"}},
                "fallback": {"provider": "gemini", "apiKeySecret": {"name": "gm", "key": "k2"}},
            },
            "llm": {"provider": "gemini", "apiKeySecret": {"name": "gm", "key": "k3"}},
        },
    )
    mcp = rendered.get("StatefulSet", "engram")["spec"]["template"]["spec"]["containers"][0]
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in mcp["env"]
        if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
    }
    assert refs == {
        "ENGRAM_EMBEDDINGS__PRIMARY__API_KEY": {"name": "oa", "key": "k1"},
        "ENGRAM_EMBEDDINGS__FALLBACK__API_KEY": {"name": "gm", "key": "k2"},
        "ENGRAM_LLM__PRIMARY__API_KEY": {"name": "gm", "key": "k3"},
    }
    env_cm = rendered.get("ConfigMap", "engram-env")["data"]
    assert env_cm["ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER"] == "openai"
    assert env_cm["ENGRAM_LLM__PRIMARY__PROVIDER"] == "gemini"
    assert not any("API_KEY" in key for key in env_cm)
    # The chart creates no Secret for provider keys: they are referenced, never copied.
    assert {s["metadata"]["name"] for s in rendered.of_kind("Secret")} == {"engram-qdrant"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_configmap_carries_a_secret(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    rendered = rendered_scenario(scenario)
    secret_values = {
        base64.b64decode(v).decode()
        for s in rendered.of_kind("Secret")
        for v in s.get("data", {}).values()
    }
    for cm in rendered.of_kind("ConfigMap"):
        for key, value in cm.get("data", {}).items():
            assert "API_KEY" not in key, key
            assert "TOKEN" not in key.upper(), key
            assert not any(secret in value for secret in secret_values), key

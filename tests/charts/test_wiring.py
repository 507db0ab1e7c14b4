"""The rendered pieces point at each other: selectors, Services, ConfigMaps, Secrets, env."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python
import pytest

from .rendering import (
    Obj,
    Rendered,
    ci_values,
    env_value,
    labels_match,
    pod_specs,
    render,
)

SCENARIOS = tuple(ci_values())
OPERATOR_SCENARIOS = tuple(s for s in SCENARIOS if s != "no-operator-values")


def _pod_labels(workload: Obj) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def _workloads(rendered: Rendered) -> list[Obj]:
    return [*rendered.of_kind("StatefulSet"), *rendered.of_kind("Deployment")]


def _mcp(rendered: Rendered) -> Obj:
    return rendered.by_component("StatefulSet", "mcp")


def _mcp_container(rendered: Rendered) -> Obj:
    container: Obj = _mcp(rendered)["spec"]["template"]["spec"]["containers"][0]
    return container


def _operator_container(rendered: Rendered) -> Obj:
    container: Obj = rendered.get("Deployment", "engram-operator")["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_workload_selector_matches_its_own_pods_and_no_other(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    workloads = _workloads(rendered_scenario(scenario))
    for workload in workloads:
        selector = workload["spec"]["selector"]
        for other in workloads:
            matches = labels_match(selector, _pod_labels(other))
            assert matches == (other is workload), (
                f"{workload['metadata']['name']} selector vs {other['metadata']['name']} pods"
            )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_service_selects_exactly_one_workload_on_a_declared_port(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    rendered = rendered_scenario(scenario)
    workloads = _workloads(rendered)
    for service in rendered.of_kind("Service"):
        selected = [
            w
            for w in workloads
            if labels_match({"matchLabels": service["spec"]["selector"]}, _pod_labels(w))
        ]
        assert len(selected) == 1, service["metadata"]["name"]
        container_ports = {
            p["name"]
            for c in selected[0]["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in container_ports, (service["metadata"]["name"], port)


def test_the_agents_service_is_named_after_the_release_and_serves_the_mcp_pods(
    default_render: Rendered,
) -> None:
    service = default_render.get("Service", "engram")
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8765, "targetPort": "http", "protocol": "TCP"},
        {"name": "metrics", "port": 9464, "targetPort": "metrics", "protocol": "TCP"},
    ]
    assert labels_match(
        {"matchLabels": service["spec"]["selector"]}, _pod_labels(_mcp(default_render))
    )
    assert _mcp(default_render)["spec"]["serviceName"] == "engram-headless"
    assert default_render.get("Service", "engram-headless")["spec"]["clusterIP"] == "None"


def test_qdrant_services_select_the_qdrant_pods_and_peers_find_each_other_before_ready(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    rendered = rendered_scenario("distributed-qdrant-values")
    qdrant = rendered.get("StatefulSet", "engram-qdrant")
    for name in ("engram-qdrant", "engram-qdrant-headless"):
        service = rendered.get("Service", name)
        assert labels_match({"matchLabels": service["spec"]["selector"]}, _pod_labels(qdrant))
    headless = rendered.get("Service", "engram-qdrant-headless")
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert qdrant["spec"]["serviceName"] == "engram-qdrant-headless"
    assert {p["port"] for p in headless["spec"]["ports"]} == {6333, 6334, 6335}


def _policy_allows(policy: Obj, pod_labels: dict[str, str], port: str) -> bool:
    for rule in policy["spec"].get("ingress", []):
        ports = {p["port"] for p in rule.get("ports", [])}
        if ports and port not in ports:
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            if "namespaceSelector" in peer or "ipBlock" in peer:
                continue
            if labels_match(peer["podSelector"], pod_labels):
                return True
    return False


# What the operator's CronJobs stamp on maintenance pods (engram_operator.builders).
JOB_POD_LABELS = {
    "app.kubernetes.io/managed-by": "engram-operator",
    "app.kubernetes.io/part-of": "engram",
    "app.kubernetes.io/component": "maintenance",
    "app.kubernetes.io/instance": "engram",
    "engram.dev/maintenance": "engram-daily",
    "engram.dev/task": "daily",
    "batch.kubernetes.io/job-name": "engram-daily-29000000",
}
# Some other Job in the same namespace.
OTHER_JOB_LABELS = {"batch.kubernetes.io/job-name": "db-migrate", "job-name": "db-migrate"}
STRANGER_LABELS = {"app": "something-else"}


@pytest.mark.parametrize("scenario", ["default", "distributed-qdrant-values"])
def test_qdrant_network_policy_admits_engram_pods_and_refuses_others(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    rendered = rendered_scenario(scenario)
    policy = rendered.get("NetworkPolicy", "engram-qdrant")
    qdrant_pods = _pod_labels(rendered.get("StatefulSet", "engram-qdrant"))
    mcp_pods = _pod_labels(_mcp(rendered))
    assert labels_match(policy["spec"]["podSelector"], qdrant_pods)
    assert not labels_match(policy["spec"]["podSelector"], mcp_pods)
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert _policy_allows(policy, mcp_pods, "http")
    assert _policy_allows(policy, JOB_POD_LABELS, "http")
    assert not _policy_allows(policy, STRANGER_LABELS, "http")
    assert not _policy_allows(policy, OTHER_JOB_LABELS, "http")
    # Another release's maintenance pods in the same namespace reach their own Qdrant only.
    other_release = JOB_POD_LABELS | {"app.kubernetes.io/instance": "engram-staging"}
    assert not _policy_allows(policy, other_release, "http")
    assert not _policy_allows(
        policy, _pod_labels(rendered.get("Deployment", "engram-operator")), "http"
    )
    distributed = scenario == "distributed-qdrant-values"
    assert _policy_allows(policy, qdrant_pods, "p2p") is distributed
    assert not _policy_allows(policy, mcp_pods, "p2p")


def test_mcp_network_policy_opens_only_the_mcp_and_metrics_ports(
    default_render: Rendered,
) -> None:
    policy = default_render.get("NetworkPolicy", "engram")
    mcp_pods = _pod_labels(_mcp(default_render))
    assert labels_match(policy["spec"]["podSelector"], mcp_pods)
    assert not labels_match(
        policy["spec"]["podSelector"],
        _pod_labels(default_render.get("StatefulSet", "engram-qdrant")),
    )
    assert _policy_allows(policy, STRANGER_LABELS, "http")
    assert _policy_allows(policy, STRANGER_LABELS, "metrics")
    assert not _policy_allows(policy, STRANGER_LABELS, "metrics-admin")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_pod_disruption_budgets_select_running_pods(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    rendered = rendered_scenario(scenario)
    workloads = _workloads(rendered)
    for pdb in rendered.of_kind("PodDisruptionBudget"):
        selected = [w for w in workloads if labels_match(pdb["spec"]["selector"], _pod_labels(w))]
        assert len(selected) == 1
        assert selected[0]["spec"]["replicas"] > 1 or selected[0]["kind"] == "StatefulSet"


@pytest.mark.parametrize("scenario", OPERATOR_SCENARIOS)
def test_mcp_mounts_the_permission_configmap_the_operator_writes(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    rendered = rendered_scenario(scenario)
    operator = _operator_container(rendered)
    pod = _mcp(rendered)["spec"]["template"]["spec"]
    container = _mcp_container(rendered)
    permissions_file = env_value(container, "ENGRAM_PERMISSIONS_FILE")
    mount = next(
        m for m in container["volumeMounts"] if permissions_file.startswith(m["mountPath"] + "/")
    )
    assert "subPath" not in mount, "a subPath mount never sees the operator's updates"
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert permissions_file.endswith("/permissions.yaml")
    assert volume["configMap"]["name"] == env_value(operator, "ENGRAM_OPERATOR_CONFIGMAP_NAME")
    assert env_value(operator, "ENGRAM_OPERATOR_CONFIGMAP_NAMESPACE") == "engram"
    # The operator owns that ConfigMap: the chart must not render (and later overwrite) it.
    assert rendered.find("ConfigMap", volume["configMap"]["name"]) is None


def test_without_the_operator_the_chart_renders_the_permission_document(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    rendered = rendered_scenario("no-operator-values")
    pod = _mcp(rendered)["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "permissions")
    configmap = rendered.get("ConfigMap", volume["configMap"]["name"])
    assert "coder:" in configmap["data"]["permissions.yaml"]
    assert not rendered.of_kind("Deployment")
    assert not rendered.of_kind("EngramMaintenance")
    assert not [r for r in rendered.of_kind("ClusterRole") if "operator" in r["metadata"]["name"]]


@pytest.mark.parametrize("scenario", OPERATOR_SCENARIOS)
def test_operator_gets_names_of_objects_that_exist(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    rendered = rendered_scenario(scenario)
    operator = _operator_container(rendered)
    assert (
        rendered.find("ServiceAccount", env_value(operator, "ENGRAM_OPERATOR_JOB_SERVICE_ACCOUNT"))
        is not None
    )
    assert (
        rendered.find("ConfigMap", env_value(operator, "ENGRAM_OPERATOR_JOB_ENV_CONFIGMAP"))
        is not None
    )
    backup_claim = env_value(operator, "ENGRAM_OPERATOR_BACKUP_PVC")
    assert rendered.find("PersistentVolumeClaim", backup_claim) is not None
    assert env_value(operator, "ENGRAM_OPERATOR_IMAGE") == _mcp_container(rendered)["image"]
    assert env_value(operator, "ENGRAM_OPERATOR_HEALTH_PORT") == "8080"
    job_secret = env_value(operator, "ENGRAM_OPERATOR_JOB_ENV_SECRETS")
    assert "," not in job_secret
    # Maintenance may run only where these objects are: the release namespace.
    assert env_value(operator, "ENGRAM_OPERATOR_JOB_NAMESPACE") == "engram"
    mcp_env_from = _mcp_container(rendered)["envFrom"]
    assert {"secretRef": {"name": job_secret}} in mcp_env_from
    assert {"configMapRef": {"name": env_value(operator, "ENGRAM_OPERATOR_JOB_ENV_CONFIGMAP")}} in (
        mcp_env_from
    )
    if scenario == "external-qdrant-values":
        assert job_secret == "team-qdrant-api-key"
    else:
        assert rendered.find("Secret", job_secret) is not None


def test_the_maintenance_service_account_has_no_api_rights(default_render: Rendered) -> None:
    operator = _operator_container(default_render)
    account = env_value(operator, "ENGRAM_OPERATOR_JOB_SERVICE_ACCOUNT")
    assert default_render.get("ServiceAccount", account)["automountServiceAccountToken"] is False
    for binding in [
        *default_render.of_kind("RoleBinding"),
        *default_render.of_kind("ClusterRoleBinding"),
    ]:
        assert all(s["name"] != account for s in binding["subjects"]), binding["metadata"]["name"]


def test_operator_runs_once_with_recreate_and_its_liveness_on_the_health_port(
    default_render: Rendered,
) -> None:
    deployment = default_render.get("Deployment", "engram-operator")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    container = _operator_container(default_render)
    assert container["command"] == ["engram-operator"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {"name": "health", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    pod_ns = next(e for e in container["env"] if e["name"] == "POD_NAMESPACE")
    assert pod_ns["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_operator_service_account_is_bound_to_its_role(default_render: Rendered) -> None:
    deployment = default_render.get("Deployment", "engram-operator")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    binding = default_render.get("RoleBinding", "engram-operator")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "engram"}
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "engram-operator",
    }
    default_render.get("Role", binding["roleRef"]["name"])


@pytest.mark.parametrize(
    ("namespaces", "expected"),
    # Empty: the release namespace only (it used to mean every namespace).
    [([], "engram"), (["agents"], "agents,engram"), (["a", "engram"], "a,engram")],
)
def test_operator_watches_the_namespaces_from_values(
    chart: helm_python.Chart, namespaces: list[str], expected: str
) -> None:
    rendered = render(chart, {"operator": {"watchNamespaces": namespaces}})
    assert env_value(_operator_container(rendered), "ENGRAM_OPERATOR_NAMESPACES") == expected


def test_mcp_service_env_matches_the_runtime_contract(default_render: Rendered) -> None:
    container = _mcp_container(default_render)
    assert container["args"] == ["serve"]
    assert env_value(container, "ENGRAM_SERVER__HOST") == "0.0.0.0"
    assert env_value(container, "ENGRAM_SERVER__PORT") == "8765"
    assert env_value(container, "ENGRAM_KUBERNETES_AUTH__ENABLED") == "true"
    assert env_value(container, "ENGRAM_KUBERNETES_AUTH__AUDIENCE") == "engram"
    assert env_value(container, "ENGRAM_SERVER__MAX_REQUEST_BYTES") == "1048576"
    assert not [e for e in container["env"] if e["name"] == "ENGRAM_SERVER__INSECURE_NO_AUTH"]
    env = default_render.get("ConfigMap", "engram-env")["data"]
    assert env["ENGRAM_STORE__MODE"] == "server"
    assert env["ENGRAM_STORE__URL"] == "http://engram-qdrant.engram.svc:6333"
    assert env["ENGRAM_STORE__COLLECTION"] == "memories"
    assert env["ENGRAM_DATA_DIR"] == "/var/lib/engram"
    assert env["ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER"] == "local"
    data_mount = next(m for m in container["volumeMounts"] if m["name"] == "data")
    assert data_mount["mountPath"] == env["ENGRAM_DATA_DIR"]


def test_mcp_probes_use_healthz_and_readyz(default_render: Rendered) -> None:
    container = _mcp_container(default_render)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert {"name": "http", "containerPort": 8765, "protocol": "TCP"} in container["ports"]


def test_each_mcp_replica_gets_its_own_queue_volume(default_render: Rendered) -> None:
    mcp = _mcp(default_render)
    assert mcp["spec"]["replicas"] == 2
    claims = mcp["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["data"]
    assert claims[0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert not [v for v in mcp["spec"]["template"]["spec"]["volumes"] if v["name"] == "data"]


def test_the_documented_emptydir_opt_out_replaces_the_queue_claims(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    mcp = _mcp(rendered_scenario("auth-off-insecure-values"))
    assert "volumeClaimTemplates" not in mcp["spec"]
    data = next(v for v in mcp["spec"]["template"]["spec"]["volumes"] if v["name"] == "data")
    assert data == {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}


def test_auth_off_sets_the_explicit_insecure_flag_and_no_token_review(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    rendered = rendered_scenario("auth-off-insecure-values")
    container = _mcp_container(rendered)
    assert env_value(container, "ENGRAM_SERVER__INSECURE_NO_AUTH") == "true"
    assert env_value(container, "ENGRAM_KUBERNETES_AUTH__ENABLED") == "false"
    assert rendered.find("ClusterRole", "engram:engram-tokenreview") is None


def test_token_review_is_the_only_right_of_the_mcp_service_account(
    default_render: Rendered,
) -> None:
    role = default_render.get("ClusterRole", "engram:engram-tokenreview")
    assert role["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
    ]
    binding = default_render.get("ClusterRoleBinding", "engram:engram-tokenreview")
    account = _mcp(default_render)["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "engram"}
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"auth": {"enabled": False}}, "auth.insecureNoAuth=true"),
        ({"qdrant": {"replicas": 3}}, "qdrant.distributed.enabled=true"),
        (
            {"qdrant": {"replicas": 2, "distributed": {"enabled": True, "replicationFactor": 3}}},
            "replicationFactor must not exceed",
        ),
        ({"qdrant": {"enabled": False}}, "qdrant.external.url is required"),
        ({"mcp": {"ingress": {"enabled": True}}}, "mcp.ingress.hosts"),
    ],
)
def test_unsafe_or_broken_combinations_refuse_to_render(
    chart: helm_python.Chart, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=message.replace(".", r"\.")):
        chart.render(values, name="engram", namespace="engram")


def test_external_qdrant_deploys_no_qdrant_and_points_at_the_given_url(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    rendered = rendered_scenario("external-qdrant-values")
    components = {o["metadata"]["labels"]["app.kubernetes.io/component"] for o in rendered.objects}
    assert "qdrant" not in components
    env = rendered.get("ConfigMap", "engram-env")["data"]
    assert env["ENGRAM_STORE__URL"] == "https://qdrant.example.com:6333"
    assert {"secretRef": {"name": "team-qdrant-api-key"}} in _mcp_container(rendered)["envFrom"]


def test_ingress_routes_its_hosts_to_the_mcp_service(
    rendered_scenario: Callable[[str], Rendered],
) -> None:
    rendered = rendered_scenario("ingress-values")
    ingress = rendered.get("Ingress", "engram")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "engram.example.com"
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "engram", "port": {"number": 8765}}
    assert ingress["spec"]["tls"] == [{"secretName": "engram-tls", "hosts": ["engram.example.com"]}]
    assert env_value(_mcp_container(rendered), "ENGRAM_SERVER__ALLOWED_HOSTS") == (
        '["engram.example.com"]'
    )
    assert "https://engram.example.com/mcp" in rendered.notes


def test_default_maintenance_schedules_are_daily_weekly_and_backup_in_utc(
    default_render: Rendered,
) -> None:
    specs = {m["metadata"]["name"]: m["spec"] for m in default_render.of_kind("EngramMaintenance")}
    # Each names the release that serves it, so no other release acts on it.
    assert {spec.pop("release") for spec in specs.values()} == {"engram/engram"}
    assert specs == {
        "engram-daily": {"task": "daily", "schedule": "0 3 * * *", "timeZone": "UTC"},
        "engram-weekly": {"task": "weekly", "schedule": "0 4 * * 0", "timeZone": "UTC"},
        "engram-backup": {
            "task": "backup",
            "schedule": "15 2 * * *",
            "timeZone": "UTC",
            "retention": {"keep": 7},
        },
    }


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"maintenance": {"defaultSchedules": {"enabled": False}}}, set()),
        (
            {
                "maintenance": {
                    "defaultSchedules": {"weekly": {"enabled": False, "schedule": "0 4 * * 0"}}
                }
            },
            {"engram-daily", "engram-backup"},
        ),
        ({"crds": {"installed": False}}, set()),
        ({"operator": {"enabled": False}}, set()),
    ],
)
def test_default_maintenance_schedules_are_switchable(
    chart: helm_python.Chart, values: dict[str, Any], expected: set[str]
) -> None:
    rendered = render(chart, values)
    assert {m["metadata"]["name"] for m in rendered.of_kind("EngramMaintenance")} == expected


def test_backup_claim_survives_uninstall_and_can_be_turned_off(chart: helm_python.Chart) -> None:
    rendered = render(chart, {})
    claim = rendered.get("PersistentVolumeClaim", "engram-backups")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    off = render(chart, {"maintenance": {"backups": {"persistence": False}}})
    assert off.find("PersistentVolumeClaim", "engram-backups") is None
    assert env_value(_operator_container(off), "ENGRAM_OPERATOR_BACKUP_PVC") == ""


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_pod_uses_a_service_account_the_chart_renders(
    rendered_scenario: Callable[[str], Rendered], scenario: str
) -> None:
    rendered = rendered_scenario(scenario)
    for where, _meta, spec in pod_specs(rendered):
        account = spec.get("serviceAccountName")
        if account:
            assert rendered.find("ServiceAccount", account) is not None, where

"""The CRDs (manifests/crds) and the example resources (manifests/examples)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from pydantic import BaseModel

from engram_contract.permissions import (
    AGENT_NAME_RE,
    K8S_NAME_RE,
    MemType,
    Operation,
    Trust,
    builtin_permission_config,
)
from engram_contract.report import RunResult, Task
from engram_contract.scopes import SCOPE_PATTERN_JSON_PATTERN
from engram_operator import models
from engram_operator.builders import build_agent_status, build_maintenance_status, build_runs_status
from engram_operator.folding import AgentSnapshot, TokenState, Verdict, fold_agents
from engram_operator.models import RunRecord, SpecError, parse_agent_spec, parse_maintenance_spec
from tests.engram_operator.crd_validation import (
    EXAMPLES_DIR,
    EXPECT_ANNOTATION,
    INVALID_DIR,
    load_crds,
    load_yaml_docs,
    schema_of,
    validate,
    walk_schema,
)

CRDS = load_crds()
AGENT = schema_of(CRDS["EngramAgent"])
MAINT = schema_of(CRDS["EngramMaintenance"])
VALID = [
    (path.name, doc) for path in sorted(EXAMPLES_DIR.glob("*.yaml")) for doc in load_yaml_docs(path)
]
INVALID = [
    (path.name, doc) for path in sorted(INVALID_DIR.glob("*.yaml")) for doc in load_yaml_docs(path)
]


def parse(doc: dict[str, Any]) -> object:
    """What the operator makes of a resource (raises SpecError like the API server would)."""
    parser = parse_agent_spec if doc["kind"] == "EngramAgent" else parse_maintenance_spec
    return parser(doc.get("spec") or {}, resource_name=doc["metadata"]["name"])


@pytest.mark.parametrize(
    ("name", "doc"), VALID, ids=[f"{n}:{d['metadata']['name']}" for n, d in VALID]
)
def test_every_example_is_accepted_by_its_crd_and_by_the_operator(
    name: str, doc: dict[str, Any]
) -> None:
    assert validate(CRDS[doc["kind"]], doc) == []
    parse(doc)


@pytest.mark.parametrize(("name", "doc"), INVALID, ids=[n for n, _ in INVALID])
def test_every_invalid_example_is_rejected_for_its_stated_reason(
    name: str, doc: dict[str, Any]
) -> None:
    expected = doc["metadata"]["annotations"][EXPECT_ANNOTATION]
    problems = validate(CRDS[doc["kind"]], doc)
    assert problems, f"{name} was accepted by the CRD"
    assert any(expected in problem for problem in problems), problems
    # The operator refuses it too (kmock, like a misconfigured server, would not).
    with pytest.raises(SpecError, match=expected):
        parse(doc)


def test_there_are_invalid_examples_for_bad_trust_empty_scope_id_and_missing_schedule() -> None:
    expectations = {doc["metadata"]["annotations"][EXPECT_ANNOTATION] for _, doc in INVALID}
    assert {"maxTrust", "write", "schedule is required"} <= expectations


def test_every_string_number_and_list_in_the_crds_is_bounded() -> None:
    unbounded = []
    for kind, crd in CRDS.items():
        for path, node in walk_schema(schema_of(crd)):
            if path in ("metadata", "apiVersion", "kind"):
                continue  # the API server bounds these itself
            kind_of = node.get("type")
            if kind_of == "string" and "maxLength" not in node and "enum" not in node:
                unbounded.append(f"{kind}.{path}: string without maxLength")
            if kind_of == "integer" and (
                "minimum" not in node or ("maximum" not in node and node.get("format") != "int64")
            ):
                unbounded.append(f"{kind}.{path}: integer without bounds")
            if kind_of == "array" and "maxItems" not in node:
                unbounded.append(f"{kind}.{path}: array without maxItems")
            if "type" not in node:
                unbounded.append(f"{kind}.{path}: no type (not structural)")
    assert unbounded == []


def _items(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    node = schema
    for key in path:
        node = node["items"] if key == "[]" else node["properties"][key]
    return node


def test_crd_enums_and_patterns_are_the_contracts() -> None:
    spec = ("spec",)
    assert _items(AGENT, *spec, "types", "[]")["enum"] == [t.value for t in MemType]
    assert _items(AGENT, *spec, "operations", "[]")["enum"] == [o.value for o in Operation]
    assert _items(AGENT, *spec, "maxTrust")["enum"] == [t.value for t in Trust]
    for field in ("read", "write"):
        assert _items(AGENT, *spec, field, "[]")["pattern"] == SCOPE_PATTERN_JSON_PATTERN
    assert _items(AGENT, *spec, "agentName")["pattern"] == AGENT_NAME_RE
    sa = ("spec", "identity", "serviceAccounts", "[]")
    assert _items(AGENT, *sa, "name")["pattern"] == K8S_NAME_RE
    assert _items(AGENT, *sa, "namespace")["pattern"] == models.NAMESPACE_RE
    assert _items(MAINT, *spec, "task")["enum"] == [t.value for t in Task]
    assert _items(MAINT, *spec, "schedule")["pattern"] == models.CRON_RE
    assert _items(MAINT, *spec, "timeZone")["pattern"] == models.TIME_ZONE_RE
    for group in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            node = _items(MAINT, *spec, "resources", group, resource)
            assert node["pattern"] == models.QUANTITY_RE
    run = ("status", "lastRun")
    assert _items(MAINT, *run, "result")["enum"] == [r.value for r in RunResult]


def test_crd_defaults_are_the_operators_defaults() -> None:
    spec = ("spec",)
    assert _items(AGENT, *spec, "types")["default"] == [
        t.value for t in models.AgentSpec.model_fields["types"].default
    ]
    assert _items(AGENT, *spec, "operations")["default"] == [
        o.value for o in models.DEFAULT_OPERATIONS
    ]
    assert (
        _items(AGENT, *spec, "maxTrust")["default"]
        == models.AgentSpec.model_fields["max_trust"].default
    )
    assert _items(AGENT, *spec, "allowUserDirect")["default"] is False
    assert _items(MAINT, *spec, "historyLimit")["default"] == models.DEFAULT_HISTORY_LIMIT
    assert _items(MAINT, *spec, "suspend")["default"] is False
    assert _items(MAINT, *spec, "dryRun")["default"] is False


def _aliases(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


@pytest.mark.parametrize(
    ("schema_path", "model"),
    [
        (("EngramAgent", "spec"), models.AgentSpec),
        (("EngramAgent", "spec", "identity"), models.Identity),
        (("EngramAgent", "spec", "identity", "token"), models.TokenIdentity),
        (
            ("EngramAgent", "spec", "identity", "serviceAccounts", "[]"),
            models.ServiceAccountBinding,
        ),
        (("EngramMaintenance", "spec"), models.MaintenanceSpec),
        (("EngramMaintenance", "spec", "retention"), models.Retention),
        (("EngramMaintenance", "spec", "resources"), models.Resources),
        (("EngramMaintenance", "spec", "resources", "limits"), models.Quantities),
        (("EngramMaintenance", "status", "lastRun"), RunRecord),
        (("EngramMaintenance", "status", "history", "[]"), RunRecord),
    ],
    ids=lambda value: ".".join(value) if isinstance(value, tuple) else value.__name__,
)
def test_crd_fields_and_model_fields_are_the_same(
    schema_path: tuple[str, ...], model: type[BaseModel]
) -> None:
    node = _items(schema_of(CRDS[schema_path[0]]), *schema_path[1:])
    assert set(node["properties"]) == _aliases(model)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crds_are_valid_apiextensions_objects(kind: str) -> None:
    kubernetes_validate.validate(CRDS[kind], "1.34", strict=True)


@pytest.mark.parametrize(
    ("kind", "columns", "short"),
    [
        ("EngramAgent", ["Agent", "Release", "Writes", "Ready", "Age"], "eagent"),
        (
            "EngramMaintenance",
            ["Task", "Release", "Schedule", "Last Run", "Result", "Merged", "Archived", "Age"],
            "emaint",
        ),
    ],
)
def test_crds_have_the_printer_columns_names_and_subresources_kubectl_needs(
    kind: str, columns: list[str], short: str
) -> None:
    crd = CRDS[kind]
    assert crd["spec"]["group"] == "engram.dev"
    assert crd["spec"]["names"]["categories"] == ["engram"]
    assert short in crd["spec"]["names"]["shortNames"]
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    default_columns = [
        column["name"]
        for column in version["additionalPrinterColumns"]
        if not column.get("priority")
    ]
    assert default_columns == columns


def test_maintenance_counts_beyond_the_default_columns_are_at_priority_one() -> None:
    (version,) = CRDS["EngramMaintenance"]["spec"]["versions"]
    wide = {c["name"] for c in version["additionalPrinterColumns"] if c.get("priority") == 1}
    assert {"Created", "Conflicts", "Errors"} <= wide


def _example(name: str) -> dict[str, Any]:
    return next(doc for _, doc in VALID if doc["metadata"]["name"] == name)


def _snapshot(doc: dict[str, Any], minute: int) -> AgentSnapshot:
    body = {
        **doc,
        "metadata": {
            **doc["metadata"],
            "namespace": "agents",
            "uid": doc["metadata"]["name"],
            "creationTimestamp": f"2026-11-29T10:{minute:02d}:00Z",
        },
    }
    return AgentSnapshot.from_body(body)


def test_example_agents_reproduce_the_prototypes_main_devops_and_workers() -> None:
    names = ["main", "devops", "writer", "analyst", "browser"]
    snapshots = [_snapshot(_example(name), minute) for minute, name in enumerate(names)]
    tokens = {snap.uid: TokenState(sha256=f"{i:064x}") for i, snap in enumerate(snapshots)}
    fold = fold_agents(snapshots, tokens, configmap="engram/engram-permissions")
    assert all(verdict.ready for verdict in fold.verdicts.values())

    builtin = builtin_permission_config().agents
    for name in ("main", "devops"):
        ours = fold.config.agents[name]
        theirs = builtin[name]
        assert ours.model_dump(exclude={"token_sha256", "service_accounts"}) == theirs.model_dump(
            exclude={"token_sha256", "service_accounts"}
        )
    for worker in ("writer", "analyst", "browser"):
        policy = fold.config.agents[worker]
        assert policy.write == [f"agent:{worker}"]
        assert policy.read == [f"agent:{worker}"]
        assert [t.value for t in policy.types] == ["procedure", "task_log"]
        assert policy.max_trust is Trust.medium
        assert Operation.maintenance not in policy.operations


def test_example_maintenances_are_the_chart_defaults_daily_weekly_and_backup() -> None:
    tasks = {
        doc["spec"]["task"]: doc["spec"]["schedule"]
        for _, doc in VALID
        if doc["kind"] == "EngramMaintenance"
    }
    assert tasks == {"daily": "0 3 * * *", "weekly": "0 4 * * 0", "backup": "15 2 * * *"}


def test_every_status_the_operator_writes_is_valid_against_the_crd() -> None:
    agent = _example("main")
    statuses = [
        build_agent_status(
            verdict=Verdict(True, "Configured", "ok", "main", "main-engram-token"),
            generation=3,
            previous={},
            now="2026-11-29T10:00:00Z",
        ),
        build_agent_status(
            verdict=Verdict(False, "InvalidSpec", "spec.write.0: bad"),
            generation=1,
            previous={},
            now="2026-11-29T10:00:00Z",
        ),
    ]
    for status in statuses:
        # The operator sends None to delete a key in a merge patch; the stored object lacks it.
        stored = {key: value for key, value in status.items() if value is not None}
        assert validate(CRDS["EngramAgent"], {**agent, "status": stored}) == []

    maintenance = _example("engram-daily")
    run = RunRecord(
        job="engram-daily-1",
        start_time="2026-11-29T03:00:00Z",
        completion_time="2026-11-29T03:01:00Z",
        result=RunResult.succeeded,
        merged=models.COUNT_MAX,
        message="m" * 1024,
    )
    status = build_maintenance_status(
        ready=True,
        reason="Scheduled",
        message="ok",
        cronjob="engram-daily",
        generation=1,
        previous={},
        now="2026-11-29T10:00:00Z",
    ) | build_runs_status([run] * 100)
    assert validate(CRDS["EngramMaintenance"], {**maintenance, "status": status}) == []


def test_example_files_are_yaml_documents_of_our_kinds() -> None:
    kinds = {doc["kind"] for _, doc in VALID + INVALID}
    assert kinds == {"EngramAgent", "EngramMaintenance"}
    assert all(doc["apiVersion"] == "engram.dev/v1alpha1" for _, doc in VALID + INVALID)
    assert Path(EXAMPLES_DIR, "invalid").is_dir()

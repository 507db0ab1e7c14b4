"""charts/engram/crds/ is a byte-for-byte copy of manifests/crds/, the source of truth."""

from __future__ import annotations

import helm_python
import kubernetes_validate
import pytest
import yaml

from .rendering import CHART_DIR, KUBE_VERSIONS, REPO

SOURCE = REPO / "manifests" / "crds"
COPY = CHART_DIR / "crds"
FIX = "run: cp manifests/crds/*.yaml charts/engram/crds/"


def test_the_source_crds_exist() -> None:
    assert sorted(p.name for p in SOURCE.glob("*.yaml")), f"no CRDs in {SOURCE}"


def test_chart_crds_are_an_exact_copy_of_manifests_crds() -> None:
    source = {p.name: p.read_bytes() for p in SOURCE.glob("*.yaml")}
    copy = {p.name: p.read_bytes() for p in COPY.glob("*.yaml")}
    assert sorted(copy) == sorted(source), FIX
    drifted = [name for name in source if source[name] != copy[name]]
    assert not drifted, f"{drifted} differ; {FIX}"


def test_helm_ships_both_engram_crds(chart: helm_python.Chart) -> None:
    kinds = {yaml.safe_load(c["data"])["spec"]["names"]["kind"] for c in chart.crds}
    assert {"EngramAgent", "EngramMaintenance"} <= kinds


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_chart_crds_pass_strict_kubernetes_validation(
    chart: helm_python.Chart, kube_version: str
) -> None:
    assert chart.crds
    for crd in chart.crds:
        for doc in yaml.safe_load_all(crd["data"]):
            if doc:
                kubernetes_validate.validate(doc, kube_version, strict=True)

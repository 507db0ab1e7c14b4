"""manifests/examples on a real API server: every example accepted by `kubectl apply`, every
file in examples/invalid/ rejected with the schema or CEL message it announces."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .clis import REPO, Clis

EXAMPLES = REPO / "manifests" / "examples"
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))
EXPECT_ANNOTATION = "engram.dev/expect-error"


def test_kubectl_apply_accepts_every_example(clis: Clis, engram_crds: None, namespace: str) -> None:
    done = clis.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES))
    applied = [line for line in done.stdout.splitlines() if line.strip()]
    expected = sum(
        1 for path in EXAMPLES.glob("*.yaml") for doc in yaml.safe_load_all(path.read_text()) if doc
    )
    assert len(applied) == expected, done.stdout
    assert all(line.endswith(" created") for line in applied), done.stdout
    # What the server stored is what was sent, plus defaults: nothing was pruned.
    listed = clis.kubectl_json("get", "-n", namespace, "engramagents,engrammaintenances")
    assert len(listed["items"]) == expected


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_kubectl_apply_rejects_each_invalid_example_with_its_stated_message(
    clis: Clis, engram_crds: None, namespace: str, path: Path
) -> None:
    doc = yaml.safe_load(path.read_text())
    expected = doc["metadata"]["annotations"][EXPECT_ANNOTATION]
    done = clis.kubectl("apply", "-n", namespace, "-f", str(path), check=False)
    assert done.returncode != 0, f"{path.name} was accepted: {done.stdout}"
    assert "is invalid" in done.stderr, done.stderr
    assert expected in done.stderr, done.stderr

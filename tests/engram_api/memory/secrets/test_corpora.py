"""Both corpora through the guard: >= 40 providers' formats blocked, benign prose passes."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from engram_api.memory.guards import SecretGuard
from tests.corpora.secrets import corpus


def test_the_committed_generated_corpora_are_what_the_generator_writes(tmp_path: Path) -> None:
    script = corpus.HERE / "generate.py"
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, capture_output=True)
    for name in ("leaks.jsonl", "benign_generated.txt"):
        assert (tmp_path / name).read_bytes() == (corpus.HERE / name).read_bytes(), name


def test_the_corpora_are_as_large_as_the_issue_asks() -> None:
    leaks = corpus.leaks()
    assert len(leaks) >= 120
    assert len({leak.kind for leak in leaks}) >= 40
    benign = corpus.benign()
    assert len(benign) >= 500
    assert sum(1 for line in benign if any("\u4e00" <= c <= "\u9fff" for c in line)) >= 150


def test_at_least_99_percent_of_the_provider_corpus_is_blocked() -> None:
    guard = SecretGuard()
    leaks = corpus.leaks()
    missed = Counter(leak.kind for leak in leaks if guard.find(leak.text) is None)
    assert sum(missed.values()) <= len(leaks) // 100, dict(missed)


def test_at_most_1_percent_of_the_benign_corpus_is_refused() -> None:
    guard = SecretGuard()
    benign = corpus.benign()
    refused = [(line, guard.find(line)) for line in benign if guard.find(line) is not None]
    assert len(refused) <= len(benign) // 100, refused

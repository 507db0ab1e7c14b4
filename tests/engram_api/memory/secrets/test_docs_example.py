"""The guard example in docs/configuration.md is a valid setting that refuses what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from engram_api.errors import SecretDetected
from engram_api.memory.guards import SecretGuard
from engram_api.settings import EngramSettings

DOC = Path(__file__).resolve().parents[4] / "docs" / "configuration.md"


def test_the_documented_extra_patterns_load_and_refuse_their_formats() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    [block] = [b for b in blocks if "extra_secret_patterns" in b]
    settings = EngramSettings.model_validate(yaml.safe_load(block))
    guard = SecretGuard(settings.guards.extra_secret_patterns)
    with pytest.raises(SecretDetected, match=r"configured pattern #2"):
        guard.check(content="ticket internal-123456 is the escalation code")
    assert guard.find("acme_live_" + "0a1b2c3d" * 4) == "configured pattern #1"

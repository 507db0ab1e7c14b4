"""The secret-guard corpora: generated fakes to block, and benign lines (EN + ZH) to pass."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).parent
BENIGN_FILES: Final = ("benign_en.txt", "benign_zh.txt", "benign_generated.txt")


@dataclass(frozen=True)
class Leak:
    kind: str
    text: str


def leaks() -> list[Leak]:
    lines = (HERE / "leaks.jsonl").read_text(encoding="utf-8").splitlines()
    return [Leak(**json.loads(line)) for line in lines if line.strip()]


def benign() -> list[str]:
    out: list[str] = []
    for name in BENIGN_FILES:
        text = (HERE / name).read_text(encoding="utf-8")
        out.extend(line for line in text.splitlines() if line.strip())
    return out

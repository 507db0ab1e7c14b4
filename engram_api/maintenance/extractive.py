"""Offline consolidation: a task-log cluster distilled into one knowledge memory, without an LLM.

Deterministic: the cluster's logs are grouped by their wording with numbers left out (so 25
runs of the same job are one line), each line keeps the values it saw, and the summary says
how many logs it covers, their date range and their outcomes. Every member is covered by a
line or by the closing count, so the knowledge in the logs outlives them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

_NUM: Final = re.compile(r"\d+(?:[.:]\d+)*")
_FAIL: Final = re.compile(
    r"\b(fail(?:ed|s|ure)?|error|errors|crash(?:ed)?|timed out)\b|失败|报错|错误", re.I
)
_OK: Final = re.compile(
    r"\b(succeed(?:ed|s)?|success(?:ful)?|fixed|passed|finished|done|completed)\b|成功|完成|修复",
    re.I,
)


def _day(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def _fill(template: str, values: list[str]) -> str:
    parts = template.split("#")
    out = parts[0]
    for i, part in enumerate(parts[1:]):
        out += (values[i] if i < len(values) else "#") + part
    return out


def extract(payloads: Sequence[dict[str, Any]], limit: int) -> str:
    """One knowledge text of at most ``limit`` characters covering every log in ``payloads``."""
    groups: dict[str, list[str]] = {}
    for p in payloads:
        text = " ".join(str(p.get("content", "")).split())
        groups.setdefault(_NUM.sub("#", text), []).append(text)
    epochs = [float(p.get("created_at_epoch", 0.0) or 0.0) for p in payloads]
    texts = [str(p.get("content", "")) for p in payloads]
    failed = sum(1 for t in texts if _FAIL.search(t))
    ok = sum(1 for t in texts if _OK.search(t) and not _FAIL.search(t))
    head = (
        f"From {len(payloads)} task logs, {_day(min(epochs))} to {_day(max(epochs))} "
        f"(outcomes: {ok} succeeded, {failed} failed, {len(texts) - ok - failed} not stated):"
    )
    lines: list[tuple[str, int]] = []
    for template, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(members) == 1:
            lines.append((f"- {members[0]}", 1))
            continue
        values = [_NUM.findall(m) for m in members]
        slots = []
        for i in range(max(len(v) for v in values)):
            seen = [v[i] for v in values if len(v) > i]
            nums = [float(x) for x in seen if re.fullmatch(r"\d+(?:\.\d+)?", x)]
            if nums and len(nums) == len(seen) and min(nums) != max(nums):
                slots.append(f"{min(nums):g}-{max(nums):g}")
            else:
                slots.append(seen[0])
        line = _fill(template, slots)
        lines.append((f"- {line} ({len(members)} times; values are ranges)", len(members)))
    out = head
    covered = 0
    for i, (text, count) in enumerate(lines):
        if len(out) + 1 + len(text) + 60 > limit:
            return (
                out
                + f"\n- and {len(lines) - i} more kinds of entry ({len(payloads) - covered} logs)"
            )
        out += "\n" + text
        covered += count
    return out

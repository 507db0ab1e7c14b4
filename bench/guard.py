"""Secret guard: recall, false positives, time per KB, and /healthz under adversarial bodies.

Side by side in one run:

- ``kingfisher+engram``: the guard Engram ships (engram_api.memory.secrets).
- ``kingfisher alone``: Kingfisher's bundled catalogue with none of our views, shapes or rules,
  to show what each part adds.
- ``previous``: the hand-kept regex list the guard replaced. Its patterns are copied below
  (from engram_api/memory/guards.py before issue 15) and live only in this file.

Corpora: tests/corpora/secrets (generated fakes of >= 40 providers' formats; benign lines in
English and Chinese). Timings: best of ``--repeat`` runs, ms per KB of UTF-8, on ordinary text
(the benign corpus) and adversarial bodies (``"a-"*N``, long runs of one separator), each at two
sizes so linearity shows as an unchanged ms/KB. The previous guard is quadratic on some bodies;
where its large size would take more than 10 x ``--old-budget-s``, it runs at twice the small
size instead (the ms/KB doubling is the quadratic growth).

Then the real app (create_app, as ``engram serve`` runs it) on a loopback port: /healthz is
probed while 1 MiB adversarial ``mem0_add`` bodies are in flight, and the delay is the slowest
probe minus the idle median, beside the same requests with a guard that finds nothing (what the
rest of the add path costs the loop). Bodies: 1 MiB (refused by length before any scan), and
the largest the guard scans at the default limit (8000 characters) and the highest allowed
(100 000).

    .venv/bin/python bench/guard.py
    .venv/bin/python bench/guard.py --sizes 16 256 --repeat 5 --requests 10

The machine is shared: compare the columns of one run, not runs on different days.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.memory.guards import SecretGuard
from engram_api.memory.secrets.detect import _builtin
from engram_api.settings import EngramSettings, LimitSettings
from tests.corpora.secrets import corpus
from tests.engram_api.server.harness import serve

# The previous guard's patterns, verbatim (engram_api/memory/guards.py before issue 15).
_OLD_VALUE = r"""["']?[^\s"',;]{6,}"""
OLD_PATTERNS: tuple[tuple[str, str], ...] = (
    ("Anthropic API key", r"\bsk-ant-[a-z0-9_-]{16,}"),
    ("OpenAI API key", r"\bsk-(?:proj-|svcacct-|admin-)?[a-z0-9_-]{20,}"),
    ("GitHub token", r"\bgh[pousr]_[a-z0-9]{30,}"),
    ("GitHub fine-grained token", r"\bgithub_pat_[a-z0-9_]{22,}"),
    ("AWS access key id", r"\b(?:akia|asia|abia|acca)[a-z0-9]{16}\b"),
    (
        "AWS secret access key",
        r"\baws_?secret(?:_?access)?_?key\b\s*[:=]\s*[\"']?[a-z0-9/+=]{40}",
    ),
    ("Google API key", r"\baiza[0-9a-z_-]{35}"),
    ("Slack token", r"\bxox[abprse]-[a-z0-9-]{10,}"),
    ("Slack webhook", r"hooks\.slack\.com/services/[a-z0-9]+/[a-z0-9]+/[a-z0-9]+"),
    ("JSON Web Token", r"\beyj[a-z0-9_-]{8,}\.eyj[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}"),
    ("private key", r"-----begin[a-z0-9 ]*private key(?: block)?-----"),
    ("bearer token", r"\bbearer\s+[a-z0-9._~+/-]{20,}=*"),
    (
        "credential assignment",
        r"\b(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|token|auth[_-]?token"
        r"|access[_-]?token|api[_-]?key|apikey|access[_-]?key|private[_-]?key)\b\s*[:=]\s*"
        + _OLD_VALUE,
    ),
    (
        "credential in prose",
        r"\b(?:my|our|the|his|her|their)\s+(?:[\w-]+\s+){0,2}(?:password|passcode|passphrase|pin"
        r"|api\s+key|secret\s+key|access\s+token|token)\s+(?:is|was|are)\s*:?\s*[\"']?\S{4,}",
    ),
    ("connection string with credentials", r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@[^\s/]+"),
)
_OLD = tuple(re.compile(rx, re.IGNORECASE) for _, rx in OLD_PATTERNS)


def old_find(text: str) -> bool:
    return any(p.search(text) for p in _OLD)


def detectors() -> dict[str, Callable[[str], bool]]:
    guard = SecretGuard()
    alone = _builtin()
    return {
        "kingfisher+engram": lambda t: guard.find(t) is not None,
        "kingfisher alone": lambda t: any(f.visible for f in alone.scan(t)),
        "previous": old_find,
    }


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "a- repeated": lambda n: "a-" * (n // 2),
    "= repeated": lambda n: "=" * n,
    "- repeated": lambda n: "-" * n,
    "spaces": lambda n: " " * n,
    "a: repeated": lambda n: "a:" * (n // 2),
    "a:a@ repeated": lambda n: "a:a@" * (n // 4),
    "password= repeated": lambda n: "password=" * (n // 9),
}


def ordinary(n: int) -> str:
    lines = corpus.benign()
    text = "\n".join(lines)
    while len(text.encode()) < n:
        text += "\n" + text
    return text.encode()[:n].decode("utf-8", "ignore")


def ms_per_kb(find: Callable[[str], bool], text: str, repeat: int) -> tuple[float, float]:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        find(text)
        best = min(best, time.perf_counter() - started)
    return best * 1000 / (len(text.encode()) / 1024), best


def quality(find: Callable[[str], bool]) -> tuple[str, str, dict[str, int]]:
    leaks = corpus.leaks()
    missed: dict[str, int] = {}
    for leak in leaks:
        if not find(leak.text):
            missed[leak.kind] = missed.get(leak.kind, 0) + 1
    benign = corpus.benign()
    refused = sum(1 for line in benign if find(line))
    blocked = len(leaks) - sum(missed.values())
    return (
        f"{blocked}/{len(leaks)} = {100 * blocked / len(leaks):.1f} %",
        f"{refused}/{len(benign)} = {100 * refused / len(benign):.1f} %",
        missed,
    )


# ------------------------------------------------------------------ /healthz under load
def _settings(data_dir: Path, content_max: int) -> EngramSettings:
    return EngramSettings(
        data_dir=data_dir,
        embeddings=EmbeddingSettings(primary=ProviderSettings(provider="hash")),
        limits=LimitSettings(content_max_chars=content_max),
    )


# As tests/engram_api/server/test_http_endpoints.py posts raw JSON-RPC.
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


def _add_body(content: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "mem0_add", "arguments": {"content": content, "scope": "global"}},
    }


async def _probe(http: httpx.AsyncClient) -> float:
    started = time.perf_counter()
    resp = await http.get("/healthz")
    assert resp.status_code == 200
    return time.perf_counter() - started


async def healthz_delay(
    content_max: int, content_chars: int, requests: int, *, guard: bool
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with serve(_settings(Path(tmp) / "data", content_max)) as running:
            for noisy in ("httpx", "mcp", "uvicorn", "engram_api"):
                logging.getLogger(noisy).setLevel(logging.WARNING)
            if not guard:
                # The baseline: the same request path with a guard that finds nothing.
                running.app.state.engram.engine.service.guard.find = lambda text: None
            content = "a-" * (content_chars // 2)
            async with (
                httpx.AsyncClient(base_url=running.base_url, timeout=120) as http,
                httpx.AsyncClient(base_url=running.base_url, timeout=120) as sender,
            ):
                idle = [await _probe(http) for _ in range(50)]
                slowest = 0.0
                for _ in range(requests):
                    send = asyncio.create_task(
                        sender.post("/mcp", json=_add_body(content), headers=HEADERS)
                    )
                    while not send.done():
                        slowest = max(slowest, await _probe(http))
                    await send
        idle_median = statistics.median(idle)
        return {
            "body_kib": round(len(content) / 1024),
            "idle_ms": round(idle_median * 1000, 2),
            "delay_ms": round((slowest - idle_median) * 1000, 2),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs=2, default=[8, 64], help="KB, small and large")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--old-budget-s", type=float, default=2.0)
    ap.add_argument("--requests", type=int, default=5, help="1 MiB adds per /healthz run")
    ap.add_argument("--skip-http", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    found = detectors()
    print("## Corpora (tests/corpora/secrets)\n")
    print("| detector | provider corpus blocked | benign refused | kinds missed |")
    print("|---|---|---|---|")
    for name, find in found.items():
        blocked, refused, missed = quality(find)
        kinds = ", ".join(f"{k} ({v})" for k, v in sorted(missed.items())) or "none"
        print(f"| {name} | {blocked} | {refused} | {kinds} |")

    small, large = (kb * 1024 for kb in args.sizes)
    print(f"\n## Time per KB (best of {args.repeat}; {args.sizes[0]} KB / {args.sizes[1]} KB)\n")
    print("| input | " + " | ".join(found) + " |")
    print("|---|" + "---|" * len(found))
    bodies: dict[str, Callable[[int], str]] = {"ordinary (benign corpus)": ordinary, **ADVERSARIAL}
    for label, make in bodies.items():
        cells = []
        for name, find in found.items():
            if name != "previous":
                parts = [f"{ms_per_kb(find, make(n), args.repeat)[0]:.3f}" for n in (small, large)]
                cells.append(" / ".join(parts))
                continue
            # The previous guard is quadratic on some bodies (46 s for 64 KB of "a-"): past the
            # budget, its second size is twice the first, which still shows the growth.
            per_kb, seconds = ms_per_kb(find, make(small), 1)
            if seconds * (large / small) ** 2 <= args.old_budget_s * 10:
                cells.append(f"{per_kb:.3f} / {ms_per_kb(find, make(large), 1)[0]:.3f}")
            else:
                twice = ms_per_kb(find, make(2 * small), 1)[0]
                cells.append(f"{per_kb:.3f} / {twice:.3f} at {2 * args.sizes[0]} KB")
        print(f"| {label} | " + " | ".join(cells) + " |")

    if args.skip_http:
        return
    print(f"\n## /healthz while adversarial mem0_add bodies are in flight ({args.requests} each)\n")
    print(
        '| content limit | body ("a-"*N) | scanned? | idle /healthz ms | delay ms, guard on |'
        " delay ms, guard finding nothing (baseline) |"
    )
    print("|---|---|---|---|---|---|")
    # A 1 MiB request (the server's size limit, less the JSON envelope): refused by length.
    # Then the largest bodies the guard does scan: the default limit, and the highest allowed.
    for limit, chars in ((8000, 1_048_576 - 256), (8000, 8000), (100_000, 100_000)):
        on = asyncio.run(healthz_delay(limit, chars, args.requests, guard=True))
        off = asyncio.run(healthz_delay(limit, chars, args.requests, guard=False))
        scanned = "no, refused by length" if chars > limit else "yes"
        print(
            f"| {limit} | {on['body_kib']} KiB | {scanned} | {on['idle_ms']} |"
            f" {on['delay_ms']} | {off['delay_ms']} |"
        )


if __name__ == "__main__":
    main()

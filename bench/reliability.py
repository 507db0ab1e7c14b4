"""Reliability drills on the real service: outages injected, not assumed.

Two drills against `engram serve` run as a real process, driven over MCP streamable HTTP:

- ``outage``: N acknowledged adds from several clients while the embedding provider (a
  separate OpenAI-compatible process on loopback, bench/embed_server.py) is killed for
  ``--outage-s`` seconds and started again; then `engram serve` itself is killed with SIGKILL
  while it replays its queue, and started again. Afterwards every acknowledged write must be
  stored exactly once: ``lost == 0``, ``duplicated == 0``, ``dead_letters == 0``.
- ``mixed``: ``--clients`` concurrent MCP clients call all six tools for ``--seconds``;
  prints errors (must be 0) and p50/p99 per tool.

The embedded store runs in the service's own process, so "the store goes down" is the
service's kill -9; an outage of a Qdrant server cannot be staged here (no server binary in
the registries this project installs from).

    .venv/bin/python bench/reliability.py outage --adds 10000 --outage-s 60
    .venv/bin/python bench/reliability.py mixed --clients 50 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EMBED_SERVER = ROOT / "bench" / "embed_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_http(url: str, *, within: float) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=2) as http:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(url)).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {within:g}s")
            await asyncio.sleep(0.05)


@dataclass
class Service:
    """`engram serve` on a loopback port, embedding through the drill's provider process."""

    data_dir: Path
    port: int
    embed_port: int
    proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        env.update(
            ENGRAM_DATA_DIR=str(self.data_dir),
            ENGRAM_SERVER__PORT=str(self.port),
            ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER="openai",
            ENGRAM_EMBEDDINGS__PRIMARY__BASE_URL=f"http://127.0.0.1:{self.embed_port}/v1",
            ENGRAM_EMBEDDINGS__PRIMARY__API_KEY="sk-drill",
            ENGRAM_EMBEDDINGS__PRIMARY__MODEL="hash-over-http",
            ENGRAM_EMBEDDINGS__PRIMARY__DIMENSION="384",
            ENGRAM_EMBEDDINGS__PRIMARY__TIMEOUT_S="2",
            ENGRAM_EMBEDDINGS__RESILIENCE__ATTEMPTS="1",
            ENGRAM_QUEUE__BASE_DELAY_S="0.2",
            ENGRAM_QUEUE__MAX_DELAY_S="2",
            ENGRAM_SERVER__METRICS_PORT="0",
            ENGRAM_LOG_LEVEL="ERROR",
        )
        return env

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            str(BIN / "engram"),
            "serve",
            env=self.env(),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await _wait_http(self.url + "/healthz", within=60)

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                await self.kill9()


@dataclass
class Provider:
    port: int
    proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(EMBED_SERVER),
            "--port",
            str(self.port),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        if line.strip() != b"ready":
            raise RuntimeError("the embedding server did not start")

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


@contextlib.asynccontextmanager
async def mcp_client(url: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        yield client


async def tool(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    if result.is_error or not isinstance(result.structured_content, dict):
        text = " ".join(getattr(b, "text", "") for b in result.content)
        raise RuntimeError(f"{name}: {text[:300]}")
    return result.structured_content


def drill_text(i: int) -> str:
    # Distinct texts (no two are exact duplicates): each names its own number and host.
    return f"Drill note {i}: deploy {i % 97} of service-{i} went to host h{i * 7919 % 10007}"


async def stored_contents(url: str) -> list[str]:
    out: list[str] = []
    async with mcp_client(url) as client:
        cursor: str | None = None
        while True:
            args: dict[str, Any] = {"scope": "global", "limit": 200}
            if cursor:
                args["cursor"] = cursor
            page = await tool(client, "mem0_get_all", **args)
            out.extend(str(m["content"]) for m in page["results"])
            cursor = page.get("next_cursor")
            if not cursor:
                return out


async def queue_stats(url: str) -> dict[str, Any]:
    async with mcp_client(url) as client:
        return dict((await tool(client, "mem0_status"))["queue"])


async def outage(adds: int, outage_s: float, workers: int, workdir: Path) -> dict[str, Any]:
    provider = Provider(free_port())
    service = Service(workdir / "data", free_port(), provider.port)
    await provider.start()
    await service.start()
    acked: dict[int, str] = {}
    queued = 0
    next_i = 0
    outage_started = asyncio.Event()

    async def worker() -> None:
        nonlocal next_i, queued
        async with mcp_client(service.url) as client:
            while next_i < adds:
                i = next_i
                next_i += 1
                out = await tool(client, "mem0_add", content=drill_text(i), scope="global")
                acked[i] = str(out.get("write_id") or out.get("id"))
                queued += bool(out.get("queued"))
                if len(acked) >= adds // 4:
                    outage_started.set()

    async def stage_outage() -> None:
        await outage_started.wait()
        await provider.kill()
        await asyncio.sleep(outage_s)
        await provider.start()

    started = time.monotonic()
    try:
        await asyncio.gather(stage_outage(), *(worker() for _ in range(workers)))
        write_s = time.monotonic() - started
        # Kill -9 in the middle of the replay: once a quarter of the queue is stored.
        queued_at_end = (await queue_stats(service.url))["depth"]
        deadline = time.monotonic() + 60
        while True:
            before_kill = await queue_stats(service.url)
            if before_kill["depth"] <= queued_at_end * 3 // 4 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        await service.kill9()
        await service.start()
        deadline = time.monotonic() + max(120.0, adds / 50)
        while True:
            stats = await queue_stats(service.url)
            if not stats["depth"] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        contents = await stored_contents(service.url)
    finally:
        await service.stop()
        await provider.kill()
    expected = {drill_text(i) for i in acked}
    return {
        "acknowledged": len(acked),
        "queued_acks": queued,
        "queued_after_writes": queued_at_end,
        "queue_depth_at_kill": before_kill["depth"],
        "stored": len(contents),
        "lost": len(expected - set(contents)),
        "duplicated": len(contents) - len(set(contents)),
        "dead_letters": stats["dead_letters"],
        "queue_depth_after": stats["depth"],
        "write_phase_s": round(write_s, 1),
    }


@dataclass
class Latencies:
    by_tool: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)


async def mixed(clients: int, seconds: float, workdir: Path) -> dict[str, Any]:
    provider = Provider(free_port())
    service = Service(workdir / "data", free_port(), provider.port)
    await provider.start()
    await service.start()
    lat = Latencies()
    stop_at = time.monotonic() + seconds

    async def one(n: int) -> None:
        rng = random.Random(n)
        mine: list[str] = []
        async with mcp_client(service.url) as client:
            while time.monotonic() < stop_at:
                roll = rng.random()
                started = time.perf_counter()
                try:
                    if roll < 0.35 or not mine:
                        name = "mem0_add"
                        out = await tool(
                            client,
                            name,
                            content=drill_text(n * 1_000_000 + len(mine)),
                            scope="global",
                        )
                        mine.append(str(out["id"]))
                    elif roll < 0.75:
                        name = "mem0_search"
                        await tool(client, name, query=f"deploy {rng.randrange(97)} of service")
                    elif roll < 0.85:
                        name = "mem0_get_all"
                        await tool(client, name, scope="global", limit=20)
                    elif roll < 0.93:
                        name = "mem0_status"
                        await tool(client, name)
                    elif roll < 0.97:
                        name = "mem0_forget"
                        await tool(client, name, memory_id=mine.pop(), reason="drill cleanup")
                    else:
                        name = "mem0_maintenance"
                        await tool(client, name, mode="report_only")
                except Exception as exc:
                    lat.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                    continue
                lat.by_tool[name].append(time.perf_counter() - started)

    try:
        await asyncio.gather(*(one(n) for n in range(clients)))
    finally:
        await service.stop()
        await provider.kill()
    per_tool = {
        name: {
            "calls": len(v),
            "p50_ms": round(statistics.median(v) * 1000, 1),
            "p99_ms": round(sorted(v)[max(0, int(len(v) * 0.99) - 1)] * 1000, 1),
        }
        for name, v in sorted(lat.by_tool.items())
    }
    every = [x for v in lat.by_tool.values() for x in v]
    return {
        "clients": clients,
        "seconds": seconds,
        "calls": len(every),
        "errors": len(lat.errors),
        "first_errors": lat.errors[:5],
        "p50_ms": round(statistics.median(every) * 1000, 1) if every else None,
        "p99_ms": round(sorted(every)[max(0, int(len(every) * 0.99) - 1)] * 1000, 1)
        if every
        else None,
        "per_tool": per_tool,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="drill", required=True)
    o = sub.add_parser("outage", help="acknowledged adds through an embedder outage and a kill -9")
    o.add_argument("--adds", type=int, default=10_000)
    o.add_argument("--outage-s", type=float, default=60.0)
    o.add_argument("--workers", type=int, default=8)
    m = sub.add_parser("mixed", help="concurrent clients calling every tool")
    m.add_argument("--clients", type=int, default=50)
    m.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engram-drill-") as tmp:
        if args.drill == "outage":
            result = asyncio.run(outage(args.adds, args.outage_s, args.workers, Path(tmp)))
        else:
            result = asyncio.run(mixed(args.clients, args.seconds, Path(tmp)))
    print(json.dumps({"command": " ".join(sys.argv), **result}, indent=2))


if __name__ == "__main__":
    main()

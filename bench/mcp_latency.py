"""MCP latency: search and add end to end over streamable HTTP, against direct engine calls.

For each collection size the store is filled, then the real app (`create_app`, the same one
`engram serve` runs) is started with uvicorn on a loopback port and driven with the MCP SDK's
HTTP client. The same searches and adds also run as direct `MemoryService` calls on the very
engine the server uses, interleaved one by one, so the ratio is the protocol's cost (HTTP,
JSON-RPC, auth, logging, metrics) and nothing else. Every query and add is embedded by a
local embedder, like a real call: by default the old default (all-MiniLM-L6-v2 int8) and the
new one (multilingual-e5-small-q4), one after the other in the same run (``--models``).
With ``--corpus-vectors local`` the fill rate is the bulk import rate (memories/s: embedding,
BM25 and store writes, batches of 512).

The memories are spliced from LoCoMo's turns and facts and the searches are LoCoMo's questions
(bench/corpora.py); `--corpus narrow` uses word salads over 39 ops words instead (searched with
word salads too), where every query word is in ~25 % of the memories: BM25's worst case.

    .venv/bin/python bench/mcp_latency.py                       # 10k and 100k memories
    .venv/bin/python bench/mcp_latency.py --corpus narrow       # BM25's worst case
    .venv/bin/python bench/mcp_latency.py --sizes 10000 --queries 100 --adds 30
    .venv/bin/python bench/mcp_latency.py --corpus-vectors hash # fill faster (see --help)
    .venv/bin/python bench/mcp_latency.py --embed-threads 1     # busy or small machines
    .venv/bin/python bench/mcp_latency.py --models local/multilingual-e5-small-q4

Client and server share one process and event loop; calls run one at a time, so this is
latency, not throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from corpora import questions, spliced, synth
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engram_api.embeddings.bm25 import Bm25Encoder
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.memory.model import Memory, MemType, Source, Trust, content_hash
from engram_api.memory.service import MemoryService
from engram_api.runtime import open_engine
from engram_api.server.app import create_app
from engram_api.settings import EngramSettings
from engram_api.store.base import PointWrite
from engram_api.store.edge import EdgeStore

GROUPS = [f"group:team-{i}" for i in range(8)]
SCOPES = ["global", *GROUPS, "dm"]
GOAL_MS = 10.0


CORPORA = {"locomo": (spliced, questions), "narrow": (synth, synth)}


async def fill(settings: EngramSettings, n: int, corpus: str, corpus_vectors: str) -> float:
    """Store n memories straight into the collection; returns seconds taken."""
    started = time.perf_counter()
    texts = CORPORA[corpus][0](n, 7)
    bm25 = Bm25Encoder()
    hashing = HashingEmbedder(384)
    now = datetime.now(UTC)
    async with open_engine(settings, background=False) as engine:
        model = engine.embedder.model_id
        for lo in range(0, n, 512):
            batch = texts[lo : lo + 512]
            if corpus_vectors == "local":
                vectors = await engine.embedder.embed_documents(batch)
            else:
                vectors = await hashing.embed_documents(batch)
            points = []
            for k, (text, vec) in enumerate(zip(batch, vectors, strict=True)):
                i = lo + k
                wid = str(uuid.uuid4())
                mem = Memory(
                    id=str(uuid.uuid5(uuid.NAMESPACE_URL, wid)),
                    content=text,
                    scope=SCOPES[i % len(SCOPES)],
                    mem_type=list(MemType)[i % 7],
                    trust=list(Trust)[i % 3],
                    source=Source.agent_output,
                    agent="bench",
                    context="",
                    created_at=now - timedelta(minutes=i),
                    updated_at=now,
                    write_id=wid,
                    # The label the server checks at startup; with --corpus-vectors hash only
                    # the stored vectors are synthetic, queries still use the local model.
                    embedding_model=model,
                    content_hash=content_hash(text),
                )
                points.append(PointWrite(mem.id, vec, bm25.document(text), mem.to_payload()))
            await engine.store.upsert(points)
    return time.perf_counter() - started


@dataclass
class Running:
    url: str
    service: MemoryService


@asynccontextmanager
async def running_server(settings: EngramSettings) -> AsyncIterator[Running]:
    app = create_app(settings)
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it every response waits ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        deadline = time.monotonic() + 120
        while not server.started:
            if task.done() or time.monotonic() > deadline:
                task.result()
                raise RuntimeError("the server did not start")
            await asyncio.sleep(0.05)
        engine = app.state.engram.engine
        store = engine.store
        status = store.index_status()
        if isinstance(store, EdgeStore) and status is not None and status.building:
            # Past store.index_threshold unindexed points the server builds the HNSW graph in
            # the background from its start; measure the steady state, as a server that has
            # been up a minute would serve it.
            t = time.perf_counter()
            await store.build_index()
            print(
                f"waited {time.perf_counter() - t:.0f} s for the server's graph build",
                file=sys.stderr,
                flush=True,
            )
        yield Running(f"http://127.0.0.1:{port}/mcp", engine.service)
    finally:
        server.should_exit = True
        await task
        sock.close()


def pct(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


async def measure(
    url: str, service: MemoryService, corpus: str, queries: int, adds: int
) -> dict[str, Any]:
    qtexts = CORPORA[corpus][1](queries + 20, 3)
    lat: dict[str, list[float]] = {k: [] for k in ("search_direct", "search_mcp")}
    lat |= {"add_direct": [], "add_mcp": []}
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):

        async def mcp(tool: str, args: dict[str, Any]) -> None:
            result = await client.call_tool(tool, args)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content}")

        for i, q in enumerate(qtexts):
            scope = GROUPS[i % len(GROUPS)]
            t = time.perf_counter()
            await service.search(agent="main", query=q, scope=scope)
            direct = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await mcp("mem0_search", {"query": q, "scope": scope})
            over = (time.perf_counter() - t) * 1000
            if i >= 20:  # the first 20 warm caches and connections
                lat["search_direct"].append(direct)
                lat["search_mcp"].append(over)
        for _ in range(adds):
            tag = uuid.uuid4().hex[:8]
            t = time.perf_counter()
            await service.add(agent="main", content=f"bench direct add {tag}", scope="global")
            lat["add_direct"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await mcp("mem0_add", {"content": f"bench mcp add {tag}", "scope": "global"})
            lat["add_mcp"].append((time.perf_counter() - t) * 1000)
    return lat


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument(
        "--corpus",
        choices=sorted(CORPORA),
        default="locomo",
        help="locomo: memories spliced from LoCoMo's turns and facts, queries are its "
        "questions (realistic vocabulary); narrow: word salads over 39 words, so every query "
        "word is in ~25%% of memories (the worst case for the BM25 half of hybrid search)",
    )
    ap.add_argument("--queries", type=int, default=300, help="searches per path and size")
    ap.add_argument("--adds", type=int, default=50, help="adds per path and size")
    ap.add_argument(
        "--corpus-vectors",
        choices=["local", "hash"],
        default="local",
        help="embed the stored corpus with the local model (realistic, about 3 ms per memory "
        "on one core) or with the hash embedder (fast fill; queries still use the local model, "
        "so past 20k memories they walk a graph built from another model's vectors: slower)",
    )
    ap.add_argument(
        "--models",
        default="local/all-MiniLM-L6-v2-int8,local/multilingual-e5-small-q4",
        help="comma-separated local models, measured one after the other",
    )
    ap.add_argument(
        "--embed-threads",
        type=int,
        default=None,
        help="onnxruntime threads for the local embedder (default: the setting's default)",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(
        "| model | memories | operation | direct p50 / p99 ms | MCP HTTP p50 / p99 ms "
        "| MCP / direct p50 |"
    )
    print("|---|---:|---|---:|---:|---:|", flush=True)
    search_p50: dict[tuple[str, int], float] = {}
    for model in args.models.split(","):
        for n in args.sizes:
            with tempfile.TemporaryDirectory(prefix="engram-bench-") as d:
                settings = EngramSettings(data_dir=Path(d))
                primary = settings.embeddings.primary.model_copy(update={"model": model})
                if args.embed_threads is not None:
                    primary = primary.model_copy(update={"threads": args.embed_threads})
                settings.embeddings = settings.embeddings.model_copy(update={"primary": primary})
                fill_s = await fill(settings, n, args.corpus, args.corpus_vectors)
                print(
                    f"{model}: filled {n:,} memories in {fill_s:.0f} s "
                    f"({n / fill_s:.0f} memories/s, {args.corpus_vectors} vectors)",
                    flush=True,
                )
                async with running_server(settings) as srv:
                    lat = await measure(srv.url, srv.service, args.corpus, args.queries, args.adds)
            for op in ("search", "add"):
                d_, m = lat[f"{op}_direct"], lat[f"{op}_mcp"]
                print(
                    f"| {model} | {n:,} | {op} | {pct(d_, 50):.1f} / {pct(d_, 99):.1f} | "
                    f"{pct(m, 50):.1f} / {pct(m, 99):.1f} | {pct(m, 50) / pct(d_, 50):.2f}x |",
                    flush=True,
                )
            search_p50[(model, n)] = pct(lat["search_mcp"], 50)
    largest = max(n for _, n in search_p50)
    for (model, n), p50 in search_p50.items():
        if n == largest:
            verdict = "met" if p50 <= GOAL_MS else "not met"
            print(f"\ngoal: MCP search p50 <= {GOAL_MS:g} ms at {n:,} memories, {model}: "
                  f"{p50:.1f} ms, {verdict}")  # fmt: skip
    print("command: .venv/bin/python " + " ".join(["bench/mcp_latency.py", *sys.argv[1:]]))


if __name__ == "__main__":
    asyncio.run(main())

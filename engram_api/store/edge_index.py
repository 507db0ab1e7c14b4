"""Background HNSW builds for the embedded store: directories, state and the child process.

qdrant-edge builds its HNSW graph only in `optimize()`, which holds the GIL and the shard for
the whole build (~20-60 s at 100k points on this machine's two cores). Run in the serving
process, that would stop every request. So the store copies its shard to `<shard>.build`, a
child process (`python -m engram_api.store.edge_index`) builds the graph there at low
priority, and the store swaps the copy in, replaying the writes it took meanwhile.

The swap is a sequence of directory renames whose every prefix is recoverable, and
`recover()` runs before each open:
  1. close the live shard;       2. `<shard>` -> `<shard>.old`;   3. `<shard>.build` -> `<shard>`;
  4. load, replay, flush;        5. `<shard>.old` -> `<shard>.trash`, then delete it.
While `<shard>.old` exists the swap is unfinished and the old shard, which holds every
write, is put back; a leftover `.build` or `.trash` is only deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

from .edge_config import QUANTIZATION, load_shard

BUILD = ".build"
OLD = ".old"
TRASH = ".trash"
STATE = ".index.json"


def sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def recover(path: Path) -> None:
    """Undo an unfinished swap and delete what an interrupted build left behind."""
    old, trash = sibling(path, OLD), sibling(path, TRASH)
    shutil.rmtree(trash, ignore_errors=True)
    if old.exists():
        if path.exists():
            path.rename(trash)
        old.rename(path)
    shutil.rmtree(trash, ignore_errors=True)
    shutil.rmtree(sibling(path, BUILD), ignore_errors=True)


class IndexState(NamedTuple):
    # Points the last build indexed with today's quantized copies (0: none, or other copies).
    indexed_points: int
    # The indexed segments hold another kind of copies (an earlier release's).
    stale_codes: bool


def read_state(path: Path) -> IndexState:
    """What the last index build left.

    An index built with other quantized copies than today's counts as none, so the next build
    (which re-quantizes every segment) starts as soon as the store allows; until then a search
    should walk the graph with the full vectors, since its parameters suit today's copies.
    """
    try:
        state = json.loads(sibling(path, STATE).read_text(encoding="utf-8"))
        points = max(0, int(state["indexed_points"]))
        codes = state.get("quantization")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return IndexState(0, stale_codes=False)
    if codes != QUANTIZATION:
        return IndexState(0, stale_codes=points > 0)
    return IndexState(points, stale_codes=False)


def write_state(path: Path, points: int) -> None:
    target = sibling(path, STATE)
    tmp = target.with_name(target.name + ".tmp")
    state = {"indexed_points": points, "quantization": QUANTIZATION}
    tmp.write_text(json.dumps(state), encoding="utf-8")
    tmp.replace(target)


def build_command(build_dir: Path, dimension: int) -> list[str]:
    return [sys.executable, "-m", "engram_api.store.edge_index", str(build_dir), str(dimension)]


def build(build_dir: Path, dimension: int) -> None:
    """Index every segment of the shard copy at `build_dir` (runs in the child process)."""
    shard = load_shard(build_dir, dimension, build=True)
    try:
        shard.optimize()
        shard.flush()
    finally:
        shard.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engram_api.store.edge_index")
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("dimension", type=int)
    args = parser.parse_args(argv)
    # Requests come first: the build takes whatever the serving process leaves.
    os.nice(10)
    try:
        build(args.build_dir, args.dimension)
    except Exception as exc:
        print(f"index build failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

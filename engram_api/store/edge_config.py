"""How the embedded store's shard is laid out on disk: vectors, quantization, HNSW, payload.

Shared by the store (which opens the shard) and the index builder (which opens a copy of it in
a child process), so both read the same shard the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import qdrant_edge as qe

from .base import DENSE, SPARSE

# HNSW graph: 16 links per node (32 on the base layer) and 100 candidates while building are
# Qdrant's defaults. payload_m adds links per indexed payload value, so a search filtered to a
# few scopes walks those scopes' sub-graphs instead of discarding most of the neighbours.
HNSW_M: Final = 16
HNSW_EF_CONSTRUCT: Final = 100
# Below this many KB of vectors matching a filter, a search scores the matches directly instead
# of walking the graph (10,000 KB is ~6,600 vectors of 384 floats).
FULL_SCAN_THRESHOLD_KB: Final = 10_000


# Searches score candidates with int8 copies of the vectors (a quarter of the size, kept in RAM)
# and rescore the best with the full vectors. Not 1-bit copies: a sentence model's vectors share
# a large common component, so many dimensions have one sign for nearly every memory and a
# 1-bit code keeps little of what tells two memories apart. On natural-language memories that
# hardly shows (100k spliced from LoCoMo: 0.995 of the exact top 5 with 1 bit, 0.997 with int8),
# but a question that matches nothing closely got lost in a graph walk steered by 1-bit scores:
# 100k narrow ops-word memories searched with LoCoMo's questions kept 0.62 of the exact top 5
# with 1 bit, 0.99 with int8 (bench/graph_recall.py --corpus narrow), for 0.3-0.6 ms more per
# search. The 0.99 quantile keeps a few outlying values from coarsening everyone's int8 steps.
QUANTIZATION: Final = "int8"


def shard_config(dimension: int, *, build: bool = False) -> qe.EdgeConfig:
    """The shard's configuration; `build` also asks optimize() to index every segment."""
    int8 = qe.ScalarQuantizationConfig(
        type=qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Pinned
    )
    return qe.EdgeConfig(
        vectors={
            DENSE: qe.EdgeVectorParams(
                size=dimension, distance=qe.Distance.Cosine, quantization_config=int8
            )
        },
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        hnsw_config=qe.HnswIndexConfig(
            m=HNSW_M,
            ef_construct=HNSW_EF_CONSTRUCT,
            full_scan_threshold=FULL_SCAN_THRESHOLD_KB,
            # One core for the build: the other serves requests meanwhile.
            max_indexing_threads=1,
            payload_m=HNSW_M,
        ),
        # 1 KB: the builder indexes every segment however small; the serving process never
        # calls optimize(), so the threshold only matters inside a build.
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1) if build else None,
        # The payload of the hits is read on every search: Cold (the default, uncached mmap)
        # cost ~0.5 ms of a 3 ms search. One search thread: a shard has few segments, and the
        # cores are better spent on the embedder and the event loop.
        payload_memory=qe.Memory.Cached,
        max_search_threads=1,
    )


def load_shard(path: Path, dimension: int | None, *, build: bool = False) -> qe.EdgeShard:
    if dimension is None:
        return qe.EdgeShard.load(str(path))
    # Loading with the current config persists it for next time. A shard made before
    # quantization was configured keeps exact-scanning its old segments until the next index
    # build rewrites them: slower, never wrong.
    try:
        return qe.EdgeShard.load(str(path), shard_config(dimension, build=build))
    except Exception as exc:
        if "incompatible" not in str(exc).lower():
            raise
    # Another dimension: load as stored so the caller can say which and what to do.
    return qe.EdgeShard.load(str(path))

"""What checking a backup whole before restoring it costs, against the restore itself.

    .venv/bin/python bench/restore.py [--sizes 10000] [--json]

Synthetic memories (unit vectors, 384-d, the hash embedder's model id) go straight into the
embedded store; a portable export is written with ``engram backup``'s code, then timed in the
same run: ``validate_export`` alone (every line read and checked, nothing written), and a full
``restore --force`` (validate + load into a new collection + count + switch). The figure that
matters is the ratio validate / restore: the price of never touching the live collection
before the whole backup is known to be good.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.maintenance.backup import restore, run_backup
from engram_api.maintenance.portable import read_manifest
from engram_api.maintenance.restore import validate_export
from engram_api.memory.model import Memory, Source, content_hash, utc_now
from engram_api.runtime import open_engine
from engram_api.settings import load_settings
from engram_api.store.base import PointWrite
from engram_contract.permissions import MemType, Trust

DIM = 384


async def one_size(n: int, root: Path) -> dict[str, Any]:
    settings = load_settings(data_dir=root / f"data-{n}")
    emb = HashingEmbedder(DIM)
    rng = np.random.default_rng(7)
    async with open_engine(settings, background=False, embedder=emb) as engine:
        now = utc_now()
        batch: list[PointWrite] = []
        for i in range(n):
            text = f"memory {i}: the service on port {1000 + i % 5000} belongs to team {i % 97}"
            wid = str(uuid.uuid4())
            mem = Memory(
                id=str(uuid.uuid5(uuid.NAMESPACE_URL, wid)),
                content=text,
                scope="global",
                mem_type=MemType.fact,
                trust=Trust.medium,
                source=Source.agent_output,
                agent="main",
                context="",
                created_at=now,
                updated_at=now,
                write_id=wid,
                embedding_model=emb.model_id,
                content_hash=content_hash(text),
            )
            vec = rng.standard_normal(DIM).astype(np.float32)
            batch.append(
                PointWrite(
                    mem.id,
                    vec / np.linalg.norm(vec),
                    engine.service.sparse.document(text),
                    mem.to_payload(),
                )
            )
            if len(batch) == 512:
                await engine.store.upsert(batch)
                batch = []
        await engine.store.upsert(batch)
        started = time.perf_counter()
        report = await run_backup(engine)
        export_s = time.perf_counter() - started
    path = Path(report.steps[0].ids["backup"][0])
    started = time.perf_counter()
    validate_export(path, read_manifest(path))
    validate_s = time.perf_counter() - started
    started = time.perf_counter()
    result = await restore(settings, path, force=True, embedder=emb)
    restore_s = time.perf_counter() - started
    assert result["memories"] == n
    return {
        "memories": n,
        "export_s": round(export_s, 2),
        "validate_s": round(validate_s, 2),
        "restore_s": round(restore_s, 2),
        "validate_share_of_restore": round(validate_s / restore_s, 3),
    }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [await one_size(n, Path(tmp)) for n in args.sizes]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| memories | export | validate only | restore (validate + load + switch) | ratio |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['memories']} | {r['export_s']} s | {r['validate_s']} s | {r['restore_s']} s "
            f"| {r['validate_share_of_restore']} |"
        )


if __name__ == "__main__":
    asyncio.run(main())

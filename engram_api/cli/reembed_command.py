"""``engram reembed --to PROVIDER[/MODEL]``: rebuild every vector with another embedder.

Run it with the service stopped (embedded) or alongside it (server: the live collection is
only read). Safe to interrupt and rerun; the switch happens only after a complete copy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from engram_api.datadir import DataDirLock
from engram_api.embeddings.config import ProviderSettings
from engram_api.embeddings.factory import build_embedder
from engram_api.errors import InvalidInput
from engram_api.memory.reembed import (
    copy_with_new_vectors,
    resolve_embedded,
    switch_embedded,
    target_name,
)
from engram_api.runtime import build_store, open_store
from engram_api.settings import EngramSettings
from engram_api.store.base import Match

PROVIDERS = ("local", "hash", "gemini", "openai")


def target_provider(settings: EngramSettings, spec: str) -> ProviderSettings:
    provider, _, model = spec.partition("/")
    if provider not in PROVIDERS:
        raise InvalidInput(
            "--to", f"must be PROVIDER[/MODEL] with PROVIDER one of {', '.join(PROVIDERS)}"
        )
    # Keys and endpoints come from whichever configured provider matches, never the command line.
    configured = [settings.embeddings.primary, settings.embeddings.fallback]
    base = next((p for p in configured if p is not None and p.provider == provider), None)
    if base is None:
        base = ProviderSettings(provider=provider)  # type: ignore[arg-type]
    return base.model_copy(update={"model": model or base.model})


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("reembed", help="rebuild all vectors with another embedding model")
    p.add_argument("--to", required=True, metavar="PROVIDER[/MODEL]")
    p.set_defaults(func=run)


def run(settings: EngramSettings, args: argparse.Namespace) -> int:
    result = asyncio.run(_reembed(settings, target_provider(settings, args.to)))
    print(
        json.dumps(result, indent=2)
        if args.json
        else "\n".join(f"{k}: {v}" for k, v in result.items())
    )
    return 0


async def _reembed(settings: EngramSettings, target: ProviderSettings) -> dict[str, object]:
    from engram_api.embeddings.config import EmbeddingSettings

    lock = DataDirLock(settings.data_dir)
    lock.acquire("engram reembed")
    embedder = build_embedder(EmbeddingSettings(primary=target))
    source = build_store(settings)
    new_name = target_name(settings.store.collection, embedder.model_id)
    qdrant_dir = settings.data_dir / "qdrant"
    if settings.store.mode == "embedded" and (
        resolve_embedded(qdrant_dir, settings.store.collection) == new_name
    ):
        # Already switched to this model: a rerun has nothing left to do.
        try:
            await source.open(None)
            total = await source.count(Match(archived=None))
        finally:
            await source.close()
            await embedder.aclose()
            lock.release()
        return {
            "model": embedder.model_id,
            "collection": new_name,
            "copied": 0,
            "already_copied": total,
            "total": total,
            "switched": True,
        }
    dest = build_store(settings, collection=new_name)
    try:
        await source.open(None)
        await open_store(dest, embedder)

        def progress(done: int, total: int) -> None:
            print(f"\rreembed: {done}/{total}", end="", file=sys.stderr, flush=True)

        res = await copy_with_new_vectors(source, dest, embedder, progress=progress)
        print(file=sys.stderr)
    finally:
        await dest.close()
        await source.close()
        await embedder.aclose()
        lock.release()
    out: dict[str, object] = {
        "model": embedder.model_id,
        "collection": new_name,
        "copied": res.copied,
        "already_copied": res.skipped,
        "total": res.total,
    }
    if settings.store.mode == "embedded":
        switch_embedded(settings.data_dir / "qdrant", settings.store.collection, new_name)
        out["switched"] = True
        out["next"] = (
            f"configure the embedder as {target.provider}"
            f"{'/' + target.model if target.model else ''} (ENGRAM_EMBEDDINGS__PRIMARY__PROVIDER) "
            "and start Engram again"
        )
    else:
        out["switched"] = False
        out["next"] = f"set ENGRAM_STORE__COLLECTION={new_name} and the new embedder, then restart"
    return out

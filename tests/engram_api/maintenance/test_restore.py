"""Restore never harms the live collection: a bad backup is refused whole, before anything is
written, and a failure half-way leaves the live memories bit-for-bit as they were."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.errors import Conflict, EngramError
from engram_api.maintenance.backup import restore, run_backup
from engram_api.maintenance.portable import DATA_FILE, MANIFEST_FILE, ExportError, sha256_file
from engram_api.memory.reembed import POINTER_FILE
from engram_api.runtime import Engine, open_engine
from engram_api.settings import EngramSettings
from tests.engram_api.maintenance.helpers import Snapshot, add, assert_same_memories, snapshot

EMB = HashingEmbedder(384)
LIVE = 62  # the case: one bad line used to leave 0 of 62 memories


async def live_engine(settings: EngramSettings) -> tuple[Path, Snapshot]:
    """A collection of LIVE memories and a backup of it; returns (backup, exact contents)."""
    async with open_engine(settings, background=False, embedder=EMB) as engine:
        for i in range(LIVE):
            await add(engine, f"Fact {i}: the service on port {8000 + i} belongs to team {i % 7}")
        report = await run_backup(engine)
        assert report.result.value == "Succeeded", report.to_dict()
    # Read back as stored (qdrant-client's local mode rounds vectors when it persists them).
    return Path(report.steps[0].ids["backup"][0]), await contents(settings)


async def contents(settings: EngramSettings) -> Snapshot:
    async with open_engine(settings, background=False, embedder=EMB) as engine:
        return await snapshot(engine)


def qdrant_state(settings: EngramSettings) -> tuple[list[str], str]:
    """The physical collections and the pointer file: a failed restore leaves both alone."""
    qdrant = settings.data_dir / "qdrant"
    if not qdrant.is_dir():
        return [], ""
    pointer = qdrant / POINTER_FILE
    names = sorted(p.name for p in qdrant.iterdir() if p.is_dir())
    return names, pointer.read_text() if pointer.exists() else ""


async def backed_up_then_changed(
    settings_factory: Callable[..., EngramSettings],
) -> tuple[EngramSettings, Path, Snapshot]:
    """A backup of LIVE memories, and one more memory written after it."""
    settings = settings_factory()
    backup, before = await live_engine(settings)
    async with open_engine(settings, background=False, embedder=EMB) as engine:
        await add(engine, "Written after the backup")
    return settings, backup, before


async def assert_untouched(
    settings: EngramSettings, state: tuple[list[str], str], before: Snapshot
) -> None:
    assert qdrant_state(settings) == state
    assert await contents(settings) == before  # payloads and float32 vectors, exactly


def rewrite(backup: Path, edit: Callable[[list[bytes]], list[bytes]], *, reseal: bool) -> None:
    """Change the data file's lines; ``reseal`` also fixes the manifest's checksum and size,
    so that only the line checks can catch the damage."""
    data = backup / DATA_FILE
    lines = gzip.decompress(data.read_bytes()).splitlines(keepends=True)
    data.write_bytes(gzip.compress(b"".join(edit(lines))))
    if reseal:
        reseal_manifest(backup)


def reseal_manifest(backup: Path, **fields: Any) -> None:
    mpath = backup / MANIFEST_FILE
    manifest = json.loads(mpath.read_text())
    data = backup / DATA_FILE
    manifest.update(sha256=sha256_file(data), bytes=data.stat().st_size, **fields)
    mpath.write_text(json.dumps(manifest))


def bad_json(lines: list[bytes]) -> list[bytes]:
    return [*lines[:30], b'{"id": "broken\n', *lines[31:]]


def short_vector(lines: list[bytes]) -> list[bytes]:
    row = json.loads(lines[5])
    row["vector"] = row["vector"][:16]  # 12 bytes: three float32 values
    return [*lines[:5], (json.dumps(row) + "\n").encode(), *lines[6:]]


def nan_vector(lines: list[bytes]) -> list[bytes]:
    import base64

    import numpy as np

    row = json.loads(lines[7])
    vec = np.frombuffer(base64.b64decode(row["vector"]), dtype="<f4").copy()
    vec[3] = np.nan
    row["vector"] = base64.b64encode(vec.tobytes()).decode()
    return [*lines[:7], (json.dumps(row) + "\n").encode(), *lines[8:]]


def bad_type(lines: list[bytes]) -> list[bytes]:
    row = json.loads(lines[9])
    row["payload"]["mem_type"] = "gossip"
    return [*lines[:9], (json.dumps(row) + "\n").encode(), *lines[10:]]


def twice(lines: list[bytes]) -> list[bytes]:
    return [*lines[:-1], lines[0]]


def dropped_tail(lines: list[bytes]) -> list[bytes]:
    return lines[:-1]


@pytest.mark.parametrize(
    ("damage", "reseal", "message"),
    [
        (bad_json, False, "checksum does not match"),
        (bad_json, True, "line 31: unreadable"),
        (short_vector, True, "line 6: vector has 3 values"),
        (nan_vector, True, "line 8: the vector is zero or not finite"),
        (bad_type, True, "line 10: payload is not a valid memory"),
        (twice, True, "appears twice"),
        (dropped_tail, True, f"holds {LIVE - 1} memories, the manifest says {LIVE}"),
    ],
    ids=[
        "corrupted",
        "corrupted-resealed",
        "short-vector",
        "nan",
        "bad-type",
        "duplicate-id",
        "truncated",
    ],
)
async def test_a_damaged_backup_is_refused_whole_and_the_live_collection_is_unchanged(
    settings_factory: Callable[..., EngramSettings],
    damage: Callable[[list[bytes]], list[bytes]],
    reseal: bool,
    message: str,
) -> None:
    settings = settings_factory()
    backup, before = await live_engine(settings)
    state = qdrant_state(settings)
    rewrite(backup, damage, reseal=reseal)
    with pytest.raises(ExportError, match=message):
        await restore(settings, backup, force=True, embedder=EMB)
    await assert_untouched(settings, state, before)


async def test_a_backup_cut_off_mid_file_is_refused(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory()
    backup, before = await live_engine(settings)
    data = backup / DATA_FILE
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(ExportError, match="checksum does not match"):
        await restore(settings, backup, force=True, embedder=EMB)
    reseal_manifest(backup)  # even with a manifest that agrees with the cut file
    with pytest.raises(ExportError, match="truncated or not gzip"):
        await restore(settings, backup, force=True, embedder=EMB)
    assert await contents(settings) == before


async def test_a_backup_of_another_model_is_refused_with_the_reembed_way_out(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory()
    backup, before = await live_engine(settings)
    other = "openai/text-embedding-3-small"

    def relabel(lines: list[bytes]) -> list[bytes]:
        rows = [json.loads(line) for line in lines]
        for row in rows:
            row["payload"]["embedding_model"] = other
        return [(json.dumps(r) + "\n").encode() for r in rows]

    rewrite(backup, relabel, reseal=False)
    reseal_manifest(backup, embedding_models={other: LIVE})
    state = qdrant_state(settings)
    for target in (None, "elsewhere"):
        with pytest.raises(Conflict) as err:
            await restore(settings, backup, collection=target, force=True, embedder=EMB)
        assert f"{LIVE} memories embedded with {other}" in str(err.value)
        assert f"engram reembed --to {EMB.model_id}" in str(err.value)
    await assert_untouched(settings, state, before)


async def test_a_restore_failing_half_way_removes_its_copy_and_keeps_the_live_collection(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings, backup, before = await backed_up_then_changed(settings_factory)
    after = await contents(settings)
    state = qdrant_state(settings)

    def interrupted(step: str, done: int, total: int | None) -> None:
        raise EngramError(f"interrupted at {done} of {total}")

    with pytest.raises(EngramError, match="interrupted at"):
        await restore(settings, backup, force=True, embedder=EMB, progress=interrupted)
    await assert_untouched(settings, state, after)
    assert len(after) == len(before) + 1


async def test_a_forced_restore_switches_only_once_complete_and_keeps_the_old_copy(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings, backup, before = await backed_up_then_changed(settings_factory)
    result = await restore(settings, backup, force=True, embedder=EMB)
    assert (result["memories"], result["replaced"]) == (LIVE, LIVE + 1)
    # A restored copy is rewritten by the store, which re-normalises vectors (last bit).
    assert_same_memories(await contents(settings), before)
    if settings.store.mode == "embedded":
        # The replaced shard stays on disk (undo by hand), out of the way of the live one.
        assert result["previous_collection"] == "memories"
        assert "memories" in qdrant_state(settings)[0]

    async def searchable(engine: Engine) -> None:
        found = await engine.service.search(agent="main", query="port 8003 team")
        assert found["results"]

    async with open_engine(settings, background=False, embedder=EMB) as engine:
        await searchable(engine)

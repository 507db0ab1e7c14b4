"""Backups: portable exports restored and compared memory by memory; server snapshots."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.errors import Conflict
from engram_api.maintenance.backup import backup_dir, import_from, restore, run_backup
from engram_api.maintenance.portable import DATA_FILE, ExportError
from engram_api.maintenance.snapshots import (
    SnapshotError,
    SnapshotServer,
    snapshot_backup,
    upload,
    verify_local,
)
from engram_api.runtime import Engine, open_engine
from engram_api.settings import EngramSettings
from tests.engram_api.maintenance.fake_qdrant import FakeQdrantSnapshots
from tests.engram_api.maintenance.helpers import add, assert_same_memories, days_ago, snapshot


async def fill(engine: Engine) -> None:
    await add(
        engine,
        "The user prefers dark mode",
        mem_type="preference",
        trust="high",
        context="settings chat",
    )
    await add(engine, "Deploys happen on Tuesdays", scope="group:ops", created_at=days_ago(40))
    await add(engine, "Ran the import; it took 4 minutes", mem_type="task_log")
    gone = await add(engine, "Bob owns billing", scope="dm:alice")
    await engine.service.forget(agent="main", memory_id=gone, reason="wrong")
    await engine.store.set_payload([gone], {"access_count": 3})


async def backup(engine: Engine) -> Path:
    report = await run_backup(engine)
    assert report.result.value == "Succeeded", report.to_dict()
    return Path(report.steps[0].ids["backup"][0])


async def test_a_restored_backup_holds_every_memory_exactly(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory()
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        await fill(engine)
        original = await snapshot(engine)
        path = await backup(engine)
    result = await restore(settings, path, collection="restored", embedder=HashingEmbedder(384))
    assert result["memories"] == len(original) == 4
    copy = settings.model_copy(
        update={"store": settings.store.model_copy(update={"collection": "restored"})}
    )
    async with open_engine(copy, background=False, embedder=HashingEmbedder(384)) as engine:
        restored = await snapshot(engine)
        # Every memory, archived ones too: payload exactly, vector to float32 precision.
        assert_same_memories(restored, original)
        # Lexical search works again: sparse vectors were rebuilt from the text.
        found = await engine.service.search(agent="main", query="Tuesdays", scope="group:ops")
        assert found["results"][0]["content"] == "Deploys happen on Tuesdays"


async def test_restore_refuses_live_data_unless_forced(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory()
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        await fill(engine)
        path = await backup(engine)
        before = await snapshot(engine)
        await add(engine, "Added after the backup")
    with pytest.raises(Conflict, match=r"holds 5 memories.*--force"):
        await restore(settings, path, embedder=HashingEmbedder(384))
    result = await restore(settings, path, force=True, embedder=HashingEmbedder(384))
    assert (result["replaced"], result["memories"]) == (5, 4)
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        assert_same_memories(await snapshot(engine), before)


async def test_a_damaged_export_is_refused(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory()
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        await fill(engine)
        path = await backup(engine)
    data = path / DATA_FILE
    raw = gzip.decompress(data.read_bytes()).replace(b"dark mode", b"evil mode")
    data.write_bytes(gzip.compress(raw))
    with pytest.raises(ExportError, match="checksum does not match"):
        await restore(settings, path, collection="restored", embedder=HashingEmbedder(384))


async def test_backups_keep_the_newest_n(settings_factory: Callable[..., EngramSettings]) -> None:
    settings = settings_factory(maintenance={"backup": {"keep": 2}})
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        await fill(engine)
        made = [await backup(engine) for _ in range(3)]
    kept = sorted(p for p in (backup_dir(settings) / "memories").iterdir())
    assert kept == sorted(made[1:])


async def test_import_adds_new_memories_and_keeps_existing_ones(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory()
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        await fill(engine)
        path = await backup(engine)
        backed_up = await snapshot(engine)
        await add(engine, "Only in this collection")
        changed, *deleted = sorted(backed_up)[:3]
        await engine.store.set_payload([changed], {"access_count": 42})
        await engine.store.delete(deleted)
        expected = await snapshot(engine)
        expected.update({i: backed_up[i] for i in deleted})

        result = await import_from(engine, path)

        # The deleted ones are back; the changed one and the new one are untouched.
        assert_same_memories(await snapshot(engine), expected)
        assert expected[changed][0]["access_count"] == 42
    assert (result["imported"], result["skipped_existing"]) == (2, 2)


async def test_import_refuses_an_export_from_another_embedding_model(
    settings_factory: Callable[..., EngramSettings],
) -> None:
    settings = settings_factory()
    async with open_engine(settings, background=False, embedder=HashingEmbedder(384)) as engine:
        await fill(engine)
        path = await backup(engine)
    other = settings.model_copy(
        update={"store": settings.store.model_copy(update={"collection": "other"})}
    )
    async with open_engine(other, background=False, embedder=HashingEmbedder(256)) as engine:
        with pytest.raises(Conflict, match="embedded with hash/384"):
            await import_from(engine, path)


@pytest.fixture
async def qdrant() -> AsyncIterator[tuple[FakeQdrantSnapshots, AsyncQdrantClient, SnapshotServer]]:
    async with FakeQdrantSnapshots() as fake:
        # The key goes only on our own download/upload requests (the client warns about a
        # key over plain HTTP, and the fake is plain HTTP).
        client = AsyncQdrantClient(url=fake.url, check_compatibility=False)
        yield fake, client, SnapshotServer(fake.url, fake.api_key, 10.0)
        await client.close()


async def test_server_keep_0_streams_each_snapshot_out_and_deletes_it_from_qdrant(
    qdrant: tuple[FakeQdrantSnapshots, AsyncQdrantClient, SnapshotServer], tmp_path: Path
) -> None:
    fake, client, server = qdrant
    made = [
        await snapshot_backup(
            client, server, "memories", tmp_path, keep=2, created_at=f"t{i}", server_keep=0
        )
        for i in range(3)
    ]
    # Qdrant holds no snapshot between backups; the backup volume keeps the newest two.
    assert fake.snaps["memories"] == []
    assert made[2].pruned_server == [made[2].name]
    assert verify_local(made[2].path)["sha256"] == made[2].sha256
    assert sorted(p.name for p in (tmp_path / "memories").glob("*.snapshot")) == sorted(
        [made[1].name, made[2].name]
    )


async def test_server_snapshots_are_downloaded_verified_and_pruned_on_both_sides(
    qdrant: tuple[FakeQdrantSnapshots, AsyncQdrantClient, SnapshotServer], tmp_path: Path
) -> None:
    fake, client, server = qdrant
    made = [
        await snapshot_backup(client, server, "memories", tmp_path, keep=2, created_at=f"t{i}")
        for i in range(3)
    ]
    assert [s.name for s in fake.snaps["memories"]] == [made[1].name, made[2].name]
    assert made[2].pruned_server == [made[0].name]
    assert made[2].pruned_local == [made[0].name]
    on_disk = sorted(p.name for p in (tmp_path / "memories").iterdir())
    assert on_disk == sorted(
        [made[1].name, made[1].name + ".json", made[2].name, made[2].name + ".json"]
    )
    manifest = verify_local(made[2].path)
    assert manifest["sha256"] == made[2].sha256

    await upload(server, "restored", made[2].path, made[2].sha256)
    [(coll, params, body)] = fake.uploads
    assert coll == "restored"
    assert params["priority"] == "snapshot"
    assert params["checksum"] == made[2].sha256
    assert made[2].path.read_bytes() in body


async def test_a_snapshot_download_that_fails_its_checksum_is_not_kept(
    qdrant: tuple[FakeQdrantSnapshots, AsyncQdrantClient, SnapshotServer], tmp_path: Path
) -> None:
    fake, client, server = qdrant
    fake.corrupt_downloads = True
    with pytest.raises(SnapshotError, match="does not match"):
        await snapshot_backup(client, server, "memories", tmp_path, keep=2, created_at="t")
    assert list((tmp_path / "memories").iterdir()) == []


async def test_a_tampered_snapshot_file_is_refused_before_upload(
    qdrant: tuple[FakeQdrantSnapshots, AsyncQdrantClient, SnapshotServer], tmp_path: Path
) -> None:
    _fake, client, server = qdrant
    snap = await snapshot_backup(client, server, "memories", tmp_path, keep=2, created_at="t")
    snap.path.write_bytes(b"tampered")
    with pytest.raises(SnapshotError, match="checksum"):
        verify_local(snap.path)

"""Every vector space is explicit: a query vector is only compared with vectors of its model.

The meaning checks run on the real default (local) model; outages are injected by a wrapper
that fails like a provider that is down, or by a loopback fake OpenAI API answering 503.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engram_api.embeddings.base import Embedder, EmbeddingError, Vector
from engram_api.embeddings.chain import EmbedderChain
from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.embeddings.local import LocalEmbedder
from engram_api.resilience import ResilienceSettings
from engram_api.runtime import Engine, StartupError, open_engine
from engram_api.settings import EngramSettings, StoreSettings
from engram_api.store.base import Match
from tests.fakes.fixtures import fake_openai
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.scripted import Fault

__all__ = ["fake_openai"]

# Never let a breaker hold a recovered provider closed for the rest of a test.
NO_BREAKER = ResilienceSettings(attempts=1, breaker_failures=1000)

PEOPLE = [
    "Alice is allergic to peanuts and carries an EpiPen",
    "Carol leads the mobile team",
    "Bob moved to Lisbon in March",
    "The billing service runs on PostgreSQL 16",
    "小王对花生过敏",
    "移动团队由小李负责",
]


class Outage:
    """A real embedder that, while ``down``, fails the way an unreachable provider does."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.down = False

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def _check(self) -> None:
        if self.down:
            raise EmbeddingError("connection refused (injected outage)", kind="connection")

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self._check()
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text: str) -> Vector:
        self._check()
        return await self.inner.embed_query(text)

    async def aclose(self) -> None:
        return None  # the real model is shared by the module's tests


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder.load()


def settings(tmp_path: Path, **store: Any) -> EngramSettings:
    return EngramSettings(
        data_dir=tmp_path / "data",
        store=StoreSettings(exact_search=True, **store),
        embeddings=EmbeddingSettings(primary=ProviderSettings(provider="hash")),
    )


async def exact_top(engine: Engine, query_vector: Vector, limit: int) -> list[str]:
    """The exact dense ranking over every stored vector: what a right-space search returns."""
    points, _ = await engine.store.scroll(Match(), limit=1000, with_vectors=True)
    scored = sorted(
        ((float(np.dot(p.dense, query_vector)), p.id) for p in points if p.dense is not None),
        reverse=True,
    )
    return [pid for _, pid in scored[:limit]]


async def add_all(engine: Engine, texts: Sequence[str]) -> None:
    for text in texts:
        out = await engine.service.add(agent="main", content=text, scope="global")
        assert out["status"] == "stored", out


@contextlib.asynccontextmanager
async def people_with_a_primary_outage(
    tmp_path: Path, local: LocalEmbedder
) -> AsyncIterator[tuple[Engine, Outage]]:
    """PEOPLE stored by the real model as primary, a hashing fallback, dense search."""
    primary = Outage(local)
    chain = EmbedderChain([primary, HashingEmbedder(local.dimension)], settings=NO_BREAKER)
    async with open_engine(
        settings(tmp_path, search_mode="dense"), background=False, embedder=chain
    ) as engine:
        await add_all(engine, PEOPLE)
        yield engine, primary


async def test_during_a_primary_outage_search_is_lexical_and_says_so_never_fallback_vectors(
    tmp_path: Path, local: LocalEmbedder
) -> None:
    async with people_with_a_primary_outage(tmp_path, local) as (engine, primary):
        for query in ("Who is allergic to peanuts", "谁对花生过敏", "who runs the mobile team"):
            up = await engine.service.search(agent="main", query=query, limit=3)
            assert up["degraded"] is False
            expected = await exact_top(engine, await local.embed_query(query), 3)
            assert [r["id"] for r in up["results"]] == expected
        up = await engine.service.search(agent="main", query="Who is allergic to peanuts")
        assert up["results"][0]["content"].startswith("Alice is allergic to peanuts")

        primary.down = True
        down = await engine.service.search(
            agent="main", query="Who is allergic to peanuts", limit=3
        )
        assert down["degraded"] is True
        assert "lexical results only (BM25)" in down["reason"]
        assert local.model_id in down["reason"]
        # The lexical answer still finds the peanut allergy; nothing is ranked by the
        # fallback's vectors, so the unrelated team lead is not offered as a match.
        contents = [r["content"] for r in down["results"]]
        assert contents
        assert contents[0].startswith("Alice is allergic to peanuts")
        assert "Carol leads the mobile team" not in contents


async def test_a_write_during_the_outage_gets_primary_vectors_on_recovery(
    tmp_path: Path, local: LocalEmbedder
) -> None:
    async with people_with_a_primary_outage(tmp_path, local) as (engine, primary):
        primary.down = True
        text = "Dana is allergic to shellfish"
        queued = await engine.service.add(agent="main", content=text, scope="global")
        assert queued["status"] == "queued"
        # Nothing of the fallback's space reached the collection.
        assert await engine.store.facet("embedding_model", Match(archived=None)) == {
            local.model_id: len(PEOPLE)
        }

        primary.down = False
        assert await engine.queue.drain() == 1
        found = await engine.service.search(agent="main", query="who cannot eat shellfish?")
        assert found["degraded"] is False
        assert found["results"][0]["content"] == text
        [point] = await engine.store.retrieve([queued["id"]], with_vectors=True)
        assert point.payload["embedding_model"] == local.model_id
        assert point.dense is not None
        [direct] = await local.embed_documents([text])
        assert float(np.dot(point.dense, direct)) > 0.999


async def test_a_stopped_remote_primary_degrades_search_and_queues_writes_until_it_answers(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    # The real HTTP path: the openai SDK against a loopback API that starts answering 503.
    cfg = EmbeddingSettings(
        primary=ProviderSettings(
            provider="openai",
            model="fake-embed",
            dimension=fake_openai.dimension,
            base_url=fake_openai.base_url,
            api_key=fake_openai.api_key,  # type: ignore[arg-type]
        ),
        fallback=ProviderSettings(provider="hash", dimension=fake_openai.dimension),
        resilience=NO_BREAKER,
    )
    s = settings(tmp_path).model_copy(update={"embeddings": cfg})
    async with open_engine(s, background=False) as engine:
        await add_all(engine, ["The deploy freeze starts on Friday"])
        fake_openai.script.standing = Fault.error(503)
        down = await engine.service.search(agent="main", query="when does the deploy freeze start")
        assert down["degraded"] is True
        assert down["results"][0]["content"] == "The deploy freeze starts on Friday"
        queued = await engine.service.add(
            agent="main", content="Rollbacks need two approvals", scope="global"
        )
        assert queued["status"] == "queued"

        fake_openai.script.standing = None
        assert await engine.queue.drain() == 1
        models = await engine.store.facet("embedding_model", Match(archived=None))
        assert models == {"openai/fake-embed": 2}
        up = await engine.service.search(agent="main", query="Rollbacks need two approvals")
        assert up["degraded"] is False
        assert up["results"][0]["content"] == "Rollbacks need two approvals"


async def test_a_chain_with_primary_and_fallback_swapped_refuses_to_start(
    tmp_path: Path, local: LocalEmbedder
) -> None:
    s = settings(tmp_path)
    hashing = HashingEmbedder(local.dimension)
    async with open_engine(s, background=False, embedder=EmbedderChain([Outage(local)])) as engine:
        await add_all(engine, PEOPLE[:2])
    swapped = EmbedderChain([hashing, Outage(local)])
    with pytest.raises(StartupError) as err:
        async with open_engine(s, background=False, embedder=swapped):
            pass
    message = str(err.value)
    assert f"from {local.model_id}" in message
    assert "make it the primary again" in message
    assert f"engram reembed --to {hashing.model_id}" in message


async def test_a_fallback_of_another_model_is_named_at_startup(
    tmp_path: Path, local: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    chain = EmbedderChain([Outage(local), HashingEmbedder(local.dimension)])
    async with open_engine(settings(tmp_path), background=False, embedder=chain):
        pass
    assert any(
        "fallback embedder hash/384 has no vectors in 'memories'" in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.parametrize("mode", ["embedded", "local-client"])
async def test_an_empty_collection_made_for_another_dimension_does_not_queue_every_add(
    tmp_path: Path, mode: str
) -> None:
    s = settings(tmp_path, mode=mode)
    async with open_engine(s, background=False, embedder=HashingEmbedder(384)):
        pass
    if mode == "embedded":
        # Nothing stored, nothing to lose: the collection is made for the new embedder.
        async with open_engine(s, background=False, embedder=HashingEmbedder(768)) as engine:
            out = await engine.service.add(agent="main", content="a first memory", scope="global")
            assert out["status"] == "stored"
    else:
        # A shared server collection is never dropped by a replica: a clear startup error.
        with pytest.raises(StartupError, match=r"384-dimensional vectors .* produces 768"):
            async with open_engine(s, background=False, embedder=HashingEmbedder(768)):
                pass


async def test_a_collection_holding_memories_of_another_dimension_is_a_startup_error(
    tmp_path: Path,
) -> None:
    s = settings(tmp_path)
    async with open_engine(s, background=False, embedder=HashingEmbedder(384)) as engine:
        await add_all(engine, PEOPLE[:1])
    with pytest.raises(StartupError, match="holds 384-dimensional vectors"):
        async with open_engine(s, background=False, embedder=HashingEmbedder(768)):
            pass


async def test_vectors_an_older_release_stored_from_a_fallback_are_re_embedded_in_the_background(
    tmp_path: Path, local: LocalEmbedder
) -> None:
    from engram_api.store.base import PointWrite
    from tests.engram_api.server.harness import wait_until

    s = settings(tmp_path, search_mode="dense")
    hashing = HashingEmbedder(local.dimension)
    text = "Dana is allergic to shellfish"
    async with open_engine(s, background=False, embedder=EmbedderChain([Outage(local)])) as engine:
        await add_all(engine, PEOPLE)
        # What an older release wrote during a primary outage: the fallback's vector, in the
        # primary's collection (found by no primary search).
        out = await engine.service.add(agent="main", content="placeholder", scope="global")
        [point] = await engine.store.retrieve([out["id"]])
        [wrong] = await hashing.embed_documents([text])
        payload = {**point.payload, "content": text, "embedding_model": hashing.model_id}
        await engine.store.upsert(
            [PointWrite(point.id, wrong, engine.service.sparse.document(text), payload)]
        )
        await engine.service.forget(agent="main", memory_id=point.id, reason="kept archived")

    async with open_engine(s, background=True, embedder=EmbedderChain([Outage(local)])) as engine:

        async def repaired() -> bool:
            models = await engine.store.facet("embedding_model", Match(archived=None))
            return models == {local.model_id: len(PEOPLE) + 1}

        await wait_until(repaired, within=60)
        [after] = await engine.store.retrieve([point.id], with_vectors=True)
        # Only the vector and its model changed: the forget made meanwhile is kept.
        assert after.payload["archived"] == 1
        assert after.payload["content"] == text
        [direct] = await local.embed_documents([text])
        assert after.dense is not None
        assert float(np.dot(after.dense, direct)) > 0.999
        await engine.service.restore(agent="main", memory_id=point.id)
        found = await engine.service.search(agent="main", query="who cannot eat shellfish?")
        assert found["degraded"] is False
        assert found["results"][0]["content"] == text

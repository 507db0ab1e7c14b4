"""Primary then fallback embedder, at run time, with retries and a breaker per provider.

A chain is itself an :class:`~engram_api.embeddings.base.Embedder` whose ``model_id`` is the
primary's (the model the collection is built with). The ``*_with_model`` methods also say which
provider answered.

A vector is only comparable with vectors of the same model, so the engine never embeds with
the chain as a whole: :meth:`EmbedderChain.for_model` gives the members that produce the
collection's vector space (the primary, and a fallback only when it serves the same model id,
e.g. another endpoint or key). A fallback of another model never writes into, nor searches,
that space; while the primary is down, search is lexical and says so (``degraded``).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from engram_api.embeddings.base import Embedder, EmbeddingConfigError, EmbeddingError, Vector
from engram_api.resilience import (
    CHAIN_ROLES,
    AllFailed,
    Failure,
    Member,
    ProviderFailed,
    ResilienceSettings,
    chain_members,
    failover,
)

_ROLES = CHAIN_ROLES


@dataclass(frozen=True)
class Embedded:
    vectors: list[Vector]
    model_id: str


@dataclass(frozen=True)
class ProviderStatus:
    role: str
    model_id: str
    breaker: str  # closed | open | half_open


async def _guarded(op: Awaitable[list[Vector]]) -> list[Vector]:
    try:
        return await op
    except EmbeddingError as exc:
        raise ProviderFailed(Failure(exc.kind, str(exc))) from None


class EmbedderChain:
    def __init__(
        self,
        providers: Sequence[Embedder],
        *,
        settings: ResilienceSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not providers:
            raise EmbeddingConfigError("an embedding chain needs at least one provider")
        if len(providers) > len(_ROLES):
            raise EmbeddingConfigError("an embedding chain has a primary and at most one fallback")
        dims = {p.dimension for p in providers}
        if len(dims) > 1:
            described = ", ".join(
                f"{role} {p.model_id} gives {p.dimension}"
                for role, p in zip(_ROLES, providers, strict=False)
            )
            raise EmbeddingConfigError(
                f"embedding providers disagree on dimension ({described}): every provider in a "
                "chain must produce the collection's dimension; set the fallback's dimension to "
                f"{providers[0].dimension} if its model supports it, or choose another fallback"
            )
        self._settings = settings or ResilienceSettings()
        self._sleep = sleep
        self._rng = rng
        self._members: list[Member[Embedder]] = chain_members(providers, self._settings, clock)

    def for_model(self, model_id: str) -> EmbedderChain | None:
        """The members that embed into ``model_id``'s vector space (None when none does).

        The view shares members, breakers and settings with this chain, so an outage seen
        through one is seen through both.
        """
        same = [m for m in self._members if m.provider.model_id == model_id]
        if not same:
            return None
        view = object.__new__(EmbedderChain)
        view._settings, view._sleep, view._rng = self._settings, self._sleep, self._rng
        view._members = same
        return view

    @property
    def model_id(self) -> str:
        return self._members[0].provider.model_id

    @property
    def dimension(self) -> int:
        return self._members[0].provider.dimension

    @property
    def model_ids(self) -> list[str]:
        return [m.provider.model_id for m in self._members]

    def status(self) -> list[ProviderStatus]:
        return [ProviderStatus(m.role, m.name, m.breaker.state.value) for m in self._members]

    def check_collection(
        self,
        *,
        collection: str,
        dimension: int | None,
        model_id: str | None = None,
        models: Mapping[str, int] | None = None,
    ) -> list[str]:
        """Refuse a collection whose vectors this chain cannot search; notes on what it can.

        ``dimension`` is the collection's configured vector size (None: not created yet);
        ``models`` counts the memories by the model that embedded them (``model_id`` names
        the one model when only that is known). The collection belongs to its most common
        model, which must be the primary: a chain whose primary and fallback were swapped
        would otherwise search one model's vectors with another model's queries.
        """
        counts = {m: n for m, n in (models or {}).items() if m}
        if model_id and not counts:
            counts[model_id] = 1
        owner = max(sorted(counts), key=lambda m: counts[m]) if counts else None
        if (dimension is not None and dimension != self.dimension) or (
            owner is not None and owner != self.model_id
        ):
            built = f"{dimension}-d vectors" if dimension is not None else "vectors"
            if owner is not None:
                built += f" from {owner}"
            swapped = (
                f" ({owner} is configured as the fallback: if primary and fallback were "
                "swapped, make it the primary again)"
                if owner in self.model_ids
                else ""
            )
            raise EmbeddingConfigError(
                f"collection {collection!r} holds {built}, but the configured embedder is "
                f"{self.model_id} ({self.dimension}-d){swapped}: run `engram reembed --to "
                f"{self.model_id}` to rebuild the vectors, or configure the model the collection "
                "was built with"
            )
        notes = [
            f"{m.role} embedder {m.provider.model_id} has no vectors in {collection!r}: while "
            f"{self.model_id} is down, searches are lexical (BM25, degraded) and writes are "
            "queued until it answers again"
            for m in self._members[1:]
            if m.provider.model_id != self.model_id
        ]
        stray = {m: n for m, n in counts.items() if m != self.model_id}
        if stray:
            described = ", ".join(f"{n} from {m}" for m, n in sorted(stray.items()))
            notes.append(
                f"collection {collection!r} also holds vectors of other models ({described}), "
                f"not comparable with {self.model_id}'s; a running server re-embeds them with "
                f"{self.model_id} in the background"
            )
        return notes

    async def _run(
        self, call: Callable[[Embedder], Awaitable[list[Vector]]], what: str
    ) -> Embedded:
        try:
            vectors, member = await failover(
                self._members,
                lambda p: _guarded(call(p)),
                settings=self._settings,
                what=what,
                sleep=self._sleep,
                rng=self._rng,
            )
        except ProviderFailed as exc:
            raise EmbeddingError(str(exc.failure.detail), kind=exc.failure.kind) from None
        except AllFailed as exc:
            kind = exc.last.kind if exc.last else "server"
            raise EmbeddingError(
                f"no embedding provider available: {exc}", kind=kind, retryable=True
            ) from None
        return Embedded(vectors, member.provider.model_id)

    async def embed_documents_with_model(self, texts: Sequence[str]) -> Embedded:
        if not texts:
            return Embedded([], self.model_id)
        return await self._run(lambda p: p.embed_documents(texts), "embedding documents")

    async def embed_query_with_model(self, text: str) -> tuple[Vector, str]:
        async def one(p: Embedder) -> list[Vector]:
            return [await p.embed_query(text)]

        result = await self._run(one, "embedding a query")
        return result.vectors[0], result.model_id

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return (await self.embed_documents_with_model(texts)).vectors

    async def embed_query(self, text: str) -> Vector:
        return (await self.embed_query_with_model(text))[0]

    async def aclose(self) -> None:
        for m in self._members:
            await m.provider.aclose()

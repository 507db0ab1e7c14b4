"""Test helpers: writing memories through the service, reading the store, a scripted LLM."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, ClassVar

from pydantic import SecretStr

from engram_api.llm.budget import BudgetedLLM, TokenBudget
from engram_api.llm.config import LLMProviderSettings, LLMSettings
from engram_api.llm.factory import build_llm
from engram_api.memory.model import utc_now
from engram_api.resilience import ResilienceSettings
from engram_api.runtime import Engine
from engram_api.store.base import Match
from tests.fakes.openai_api import FakeOpenAI

Snapshot = dict[str, tuple[dict[str, Any], list[float]]]


def days_ago(n: float) -> datetime:
    return utc_now() - timedelta(days=n)


async def add(
    engine: Engine,
    content: str,
    *,
    scope: str = "global",
    mem_type: str = "fact",
    trust: str = "medium",
    agent: str = "main",
    source: str = "agent_output",
    context: str = "",
    created_at: datetime | None = None,
) -> str:
    out = await engine.service.add(
        agent=agent,
        content=content,
        scope=scope,
        mem_type=mem_type,
        trust=trust,
        source=source,
        context=context,
        created_at=created_at,
    )
    assert out["status"] == "stored", out
    return str(out["id"])


async def payload(engine: Engine, memory_id: str) -> dict[str, Any]:
    [p] = await engine.store.retrieve([memory_id])
    return p.payload


async def snapshot(engine: Engine) -> Snapshot:
    """Every point, archived included: payload and vector."""
    out: Snapshot = {}
    offset: str | None = None
    while True:
        page, offset = await engine.store.scroll(
            Match(archived=None), limit=256, offset=offset, with_vectors=True
        )
        for p in page:
            assert p.dense is not None
            out[p.id] = (p.payload, [float(x) for x in p.dense])
        if offset is None:
            return out


def assert_same_memories(got: Snapshot, expected: Snapshot) -> None:
    """Equal payloads, and vectors equal up to float32 rounding.

    Exact vector equality is not a property of the stores: qdrant-client's local mode
    normalises the stored vectors *in place* on every cosine search
    (``qdrant_client/local/distances.py``, 1.19-1.20), which its authors call a no-op because
    they are unit vectors already. Whether re-normalising a unit float32 vector is a no-op
    depends on the BLAS kernel computing the norm: with OpenBLAS's SkylakeX kernel it is, with
    its Haswell, Zen or Sandybridge kernels (``OPENBLAS_CORETYPE``, or a CPU without AVX-512)
    it moves the last bit (3e-8), so any run that searches makes an exact comparison fail.
    """
    assert sorted(got) == sorted(expected)
    for mid, (p, vec) in expected.items():
        assert got[mid][0] == p, mid
        assert max(abs(a - b) for a, b in zip(got[mid][1], vec, strict=True)) < 1e-6, mid


async def active(engine: Engine, **match: Any) -> dict[str, dict[str, Any]]:
    points, _ = await engine.store.scroll(Match(archived=False, **match), limit=1000)
    return {p.id: p.payload for p in points}


def quoted(user_message: str) -> list[str]:
    """The JSON strings a prompt quoted (memory texts), in order."""
    out = []
    for line in user_message.splitlines():
        start = line.find('"')
        if start >= 0:
            out.append(json.loads(line[start:]))
    return out


Handler = Callable[[str], str]


def keep_as_is(user: str) -> str:
    mem_type = user.split("Memory type: ", 1)[1].split("\n", 1)[0]
    [content] = quoted(user)
    return json.dumps({"statements": [{"content": content, "mem_type": mem_type}]})


class FakeChat:
    """The loopback OpenAI fake, answering each maintenance step with a test's function.

    LLM calls go through the real provider classes (openai SDK over HTTP).
    """

    STEPS: ClassVar[dict[str, str]] = {
        "Rewrite it into clean, atomic": "reextract",
        "Decide how they relate": "conflicts",
        "into ONE knowledge memory": "consolidate_final",
        "distil task logs": "consolidate_map",
    }

    def __init__(self) -> None:
        self.api = FakeOpenAI(reply=self._reply)
        # By default re-extraction keeps each memory as it is (tests of other steps).
        self.handlers: dict[str, Handler] = {"reextract": keep_as_is}
        self.prompts: dict[str, list[str]] = defaultdict(list)
        self._llms: list[BudgetedLLM] = []

    def _reply(self, messages: list[dict[str, Any]]) -> str:
        system = str(messages[0]["content"])
        user = str(messages[-1]["content"])
        step = next(s for marker, s in self.STEPS.items() if marker in system)
        self.prompts[step].append(user)
        return self.handlers[step](user)

    def llm(self, budget: int = 1_000_000) -> BudgetedLLM:
        chain = build_llm(
            LLMSettings(
                primary=LLMProviderSettings(
                    provider="openai",
                    base_url=self.api.base_url,
                    api_key=SecretStr(self.api.api_key),
                ),
                resilience=ResilienceSettings(attempts=1),
            )
        )
        assert chain is not None
        llm = BudgetedLLM(chain, TokenBudget(budget), default_max_output_tokens=1024)
        self._llms.append(llm)
        return llm

    async def __aenter__(self) -> FakeChat:
        await self.api.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for llm in self._llms:
            await llm.aclose()
        await self.api.__aexit__(exc_type, exc, tb)

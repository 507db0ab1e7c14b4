"""Every read path, add's answer, forget and restore reveal exactly what the reference model of
the policy (tests/policy_model.py) allows, for generated policies, arguments and memories.

A fixed universe holds a memory for every (scope form, type, trust, archived) combination, so
every policy meets every kind of memory; each add example also writes a generated memory (and
removes it again). The mechanics are the point here, so the store is the embedded one with
exact search and the hashing embedder. Runs are derandomized: a failure reproduces.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram_api.embeddings.hashing import HashingEmbedder
from engram_api.errors import EngramError
from engram_api.memory.guards import SecretGuard
from engram_api.memory.model import content_hash, content_point_id, point_id
from engram_api.memory.policy import PolicyEngine
from engram_api.memory.service import MemoryService
from engram_api.settings import LimitSettings
from engram_api.store.edge import EdgeStore
from engram_contract.permissions import (
    AgentPolicy,
    MemType,
    Operation,
    PermissionConfig,
    Trust,
    builtin_permission_config,
)
from tests import policy_model as model

AGENT = "tester"
SCOPES = ["global", "dm", "dm:a", "dm:b", "group:x", "group:y", "agent:p", "agent:q"]
# Scopes no memory lives in, and text that is no scope: both must be answered by the rules.
EMPTY_SCOPES = ["dm:c", "group:z", "agent:tester"]
NOT_SCOPES = ["dm:*", "group:", "nope", "cross:", "cross:x y", "all:x"]
STORED_TYPES = ["fact", "preference", "task_log"]
TRUSTS = ["low", "medium", "high"]
PATTERNS = [
    "global",
    "dm",
    "dm:*",
    "dm:a",
    "dm:c",
    "group:*",
    "group:x",
    "group:z",
    "agent:*",
    "agent:p",
    "agent:tester",
]
SEARCH_SCOPES = [*SCOPES, *EMPTY_SCOPES, *NOT_SCOPES, "all", "cross:x", "cross:y", "cross:z"]

policies = st.builds(
    model.Policy,
    read=st.lists(st.sampled_from(PATTERNS), max_size=4, unique=True).map(tuple),
    write=st.lists(st.sampled_from(PATTERNS), max_size=4, unique=True).map(tuple),
    ops=st.frozensets(st.sampled_from([o.value for o in Operation])),
    types=st.frozensets(st.sampled_from([t.value for t in MemType]), min_size=1),
    max_trust=st.sampled_from(TRUSTS),
    allow_user_direct=st.booleans(),
)
COMMON = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def engine_config(p: model.Policy) -> PermissionConfig:
    return PermissionConfig(
        agents={
            AGENT: AgentPolicy(
                read=list(p.read),
                write=list(p.write),
                operations=[Operation(o) for o in sorted(p.ops)],
                types=[MemType(t) for t in sorted(p.types)],
                max_trust=Trust(p.max_trust),
                allow_user_direct=p.allow_user_direct,
            )
        }
    )


@dataclass
class Universe:
    runner: asyncio.Runner
    service: MemoryService
    store: EdgeStore
    mems: dict[str, model.Mem]

    def run(self, coro: Any) -> Any:
        return self.runner.run(coro)

    def act_as(self, p: model.Policy) -> None:
        self.service.policy.replace(engine_config(p))

    def settle(self) -> None:
        """Fold the access counts earlier searches left pending into the store now, so no
        background flush changes a payload in the middle of an example."""
        self.run(self.service.access.flush())

    def attempt(self, coro: Any) -> dict[str, Any] | model.Refused:
        try:
            result: dict[str, Any] = self.run(coro)
        except EngramError as exc:
            return model.Refused(exc.kind)  # type: ignore[arg-type]
        return result


@pytest.fixture(scope="module")
def universe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Universe]:
    path: Path = tmp_path_factory.mktemp("policy-universe")
    with asyncio.Runner() as runner:
        store = EdgeStore(path / "edge", exact=True)
        runner.run(store.open(64))
        service = MemoryService(
            store=store,
            embedder=HashingEmbedder(64),
            policy=PolicyEngine(builtin_permission_config()),
            guard=SecretGuard(),
            limits=LimitSettings(),
        )
        mems: dict[str, model.Mem] = {}

        async def fill() -> None:
            combos = itertools.product(SCOPES, STORED_TYPES, TRUSTS, (False, True))
            for n, (scope, mem_type, trust, archived) in enumerate(combos):
                content = f"note {n}: the harbour crane moves {mem_type} cargo"
                got = await service.add(
                    agent="devops",
                    content=content,
                    scope=scope,
                    mem_type=mem_type,
                    trust=trust,
                    context=f"context-{n}-private",
                )
                mid = got["id"]
                if archived:
                    await service.forget(agent="devops", memory_id=mid, reason="old")
                mems[mid] = model.Mem(mid, scope, mem_type, trust, archived, content)

        runner.run(fill())
        u = Universe(runner, service, store, mems)
        yield u
        runner.run(service.aclose())
        runner.run(store.close())


def _ids(results: list[dict[str, Any]]) -> set[str]:
    return {r["id"] for r in results}


def test_search_returns_only_what_the_policy_lets_the_caller_read(universe: Universe) -> None:
    cases = 0

    @settings(COMMON, max_examples=3500)
    @given(
        p=policies,
        scope=st.sampled_from(SEARCH_SCOPES),
        mem_type=st.one_of(st.none(), st.sampled_from(STORED_TYPES)),
        trust_min=st.one_of(st.none(), st.sampled_from(TRUSTS)),
        limit=st.integers(1, 50),
    )
    def check(
        p: model.Policy, scope: str, mem_type: str | None, trust_min: str | None, limit: int
    ) -> None:
        nonlocal cases
        cases += 1
        universe.act_as(p)
        want = model.search(
            p, universe.mems.values(), scope, mem_type=mem_type, trust_min=trust_min
        )
        got = universe.attempt(
            universe.service.search(
                agent=AGENT,
                query="harbour crane cargo",
                scope=scope,
                mem_type=mem_type,
                trust_min=trust_min,
                limit=limit,
            )
        )
        if isinstance(want, model.Refused):
            assert got == want
            return
        assert isinstance(got, dict), got
        ids = _ids(got["results"])
        assert ids <= want.ids, sorted(universe.mems[i].scope for i in ids - want.ids)
        assert got["count"] == len(ids) == min(limit, len(want.ids))
        assert tuple(got["scopes_searched"]) == want.scopes_searched

    check()
    assert cases >= 3500


def test_get_all_lists_exactly_the_readable_memories(universe: Universe) -> None:
    cases = 0

    @settings(COMMON, max_examples=2000)
    @given(
        p=policies,
        scope=st.one_of(st.none(), st.sampled_from([*SCOPES, *EMPTY_SCOPES, *NOT_SCOPES[:3]])),
        mem_type=st.one_of(st.none(), st.sampled_from(STORED_TYPES)),
        include_archived=st.booleans(),
        limit=st.sampled_from([40, 200]),
    )
    def check(
        p: model.Policy,
        scope: str | None,
        mem_type: str | None,
        include_archived: bool,
        limit: int,
    ) -> None:
        nonlocal cases
        cases += 1
        universe.act_as(p)
        want = model.get_all(
            p, universe.mems.values(), scope, mem_type=mem_type, include_archived=include_archived
        )
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            got = universe.attempt(
                universe.service.get_all(
                    agent=AGENT,
                    scope=scope,
                    mem_type=mem_type,
                    cursor=cursor,
                    limit=limit,
                    include_archived=include_archived,
                )
            )
            if isinstance(want, model.Refused):
                assert got == want
                return
            assert isinstance(got, dict), got
            assert got["total"] == len(want.ids)
            seen |= _ids(got["results"])
            cursor = got["next_cursor"]
            if cursor is None:
                break
        assert seen == want.ids

    check()
    assert cases >= 2000


def test_status_counts_only_readable_memories(universe: Universe) -> None:
    cases = 0
    universe.settle()

    @settings(COMMON, max_examples=1500)
    @given(p=policies)
    def check(p: model.Policy) -> None:
        nonlocal cases
        cases += 1
        universe.act_as(p)
        want = model.status(p, universe.mems.values())
        got = universe.attempt(universe.service.status(agent=AGENT))
        if isinstance(want, model.Refused):
            assert got == want
            return
        assert isinstance(got, dict), got
        assert got["active_memories"] == want.active
        assert got["archived_memories"] == want.archived
        assert got["by_scope"] == want.by_scope
        assert got["by_type"] == want.by_type
        assert got["by_trust"] == want.by_trust
        assert got["pending_access_updates"] == 0

    check()
    assert cases >= 1500


def _private_marks(m: model.Mem) -> list[str]:
    n = m.content.split(":", 1)[0].removeprefix("note ")
    return [f"context-{n}-private", "devops"]


def test_add_shows_a_memory_only_to_a_caller_that_may_read_it(universe: Universe) -> None:
    cases = 0
    stored = list(universe.mems.values())
    # A generated memory: sometimes another agent's exact text in its own scope and type (a
    # duplicate), sometimes a new text anywhere.
    copies = st.sampled_from(stored).map(lambda m: (m.content, m.scope, m.mem_type))
    fresh = st.tuples(
        st.text("abcdefgh ", min_size=1, max_size=12).map(lambda t: f"fresh note {t}"),
        st.sampled_from([*SCOPES, *EMPTY_SCOPES]),
        st.sampled_from([t.value for t in MemType]),
    )

    @settings(COMMON, max_examples=1500)
    @given(
        p=policies,
        write=st.one_of(copies, fresh),
        source=st.sampled_from(["agent_output", "user_direct"]),
        trust=st.sampled_from(TRUSTS),
    )
    def check(p: model.Policy, write: tuple[str, str, str], source: str, trust: str) -> None:
        nonlocal cases
        cases += 1
        content, scope, mem_type = write
        universe.act_as(p)
        want = model.add(
            p,
            universe.mems.values(),
            content=content,
            scope=scope,
            mem_type=mem_type,
            source=source,
        )
        write_id = str(uuid.uuid4())
        got = universe.attempt(
            universe.service.add(
                agent=AGENT,
                content=content,
                scope=scope,
                mem_type=mem_type,
                source=source,
                trust=trust,
                context="my own context",
                write_id=write_id,
            )
        )
        # The universe stays as it was: whatever this example stored goes again. A new memory
        # lands on its content's point (or its write id's, beside an archived twin).
        new_ids = {point_id(write_id), content_point_id(scope, mem_type, content_hash(content))}
        universe.run(universe.store.delete(sorted(new_ids - universe.mems.keys())))
        if isinstance(want, model.Refused):
            assert got == want
            return
        assert isinstance(got, dict), got
        outcome, dup_id = want
        if outcome == "blind":
            assert got["status"] == "stored"
            assert "memory" not in got, got
            assert "id" not in got, got
            text = json.dumps(got)
            for m in stored:
                if m.content == content:
                    assert not any(mark in text for mark in _private_marks(m)), got
        elif outcome == "duplicate":
            assert got["status"] == "duplicate"
            assert got["id"] == dup_id
            assert got["memory"]["id"] == dup_id
        else:
            assert got["status"] == "stored"
            assert got["memory"]["content"] == content.strip()  # stored stripped
            assert got["id"] in new_ids

    check()
    assert cases >= 1500


def test_forget_and_restore_change_only_what_the_policy_allows(universe: Universe) -> None:
    cases = 0
    ids = sorted(universe.mems)
    store = universe.store
    universe.settle()

    @settings(COMMON, max_examples=1500)
    @given(
        p=policies,
        memory_id=st.one_of(st.sampled_from(ids), st.just(str(uuid.UUID(int=7)))),
        restore=st.booleans(),
    )
    def check(p: model.Policy, memory_id: str, restore: bool) -> None:
        nonlocal cases
        cases += 1
        universe.act_as(p)
        fn = model.restore if restore else model.forget
        want = fn(p, universe.mems, memory_id)
        before = universe.run(store.retrieve([memory_id]))
        if restore:
            call = universe.service.restore(agent=AGENT, memory_id=memory_id)
        else:
            call = universe.service.forget(agent=AGENT, memory_id=memory_id, reason="outdated")
        got = universe.attempt(call)
        after = universe.run(store.retrieve([memory_id]))
        if isinstance(want, model.Refused):
            assert got == want
        else:
            assert isinstance(got, dict), got
            assert got["status"] == want, (got, want)
        if want in ("archived", "restored"):
            assert bool(after[0].payload["archived"]) != bool(before[0].payload["archived"])
            # Put it back for the next example.
            universe.run(
                store.set_payload(
                    [memory_id],
                    {k: before[0].payload.get(k, "") for k in ("archived", "archived_reason")},
                )
            )
        else:
            assert [a.payload for a in after] == [b.payload for b in before]

    check()
    assert cases >= 1500

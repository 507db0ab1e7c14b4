"""Permissions: which agent may do which operation on which scope and type.

The policy is a pure function of the permission config; the config itself can be swapped at
run time (the server reloads it when the file changes), so callers go through one
:class:`PolicyEngine` and never cache an :class:`AgentPolicy`.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram_api.errors import InvalidInput, PermissionDenied
from engram_contract.permissions import (
    AgentPolicy,
    MemType,
    Operation,
    PermissionConfig,
    Trust,
)
from engram_contract.scopes import ID_RE, any_pattern_matches, is_scope

from .model import Source


@dataclass(frozen=True)
class ScopeSelector:
    """A set of concrete scopes: listed exactly, or every scope of a kind (``group:*``)."""

    exact: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()

    def is_empty(self) -> bool:
        return not self.exact and not self.kinds

    def covers(self, scope: str) -> bool:
        return scope in self.exact or (scope.split(":", 1)[0] in self.kinds and ":" in scope)

    @staticmethod
    def of(*scopes: str) -> ScopeSelector:
        return ScopeSelector(exact=frozenset(scopes))


@dataclass(frozen=True)
class SearchPlan:
    """What a search reads: one selector per concurrent query, and their names for the answer."""

    queries: tuple[ScopeSelector, ...]
    searched: tuple[str, ...]


def selector_from_patterns(patterns: list[str]) -> ScopeSelector:
    exact = {p for p in patterns if not p.endswith(":*")}
    kinds = {p[:-2] for p in patterns if p.endswith(":*")}
    return ScopeSelector(exact=frozenset(exact), kinds=frozenset(kinds))


class PolicyEngine:
    def __init__(self, config: PermissionConfig) -> None:
        self._config = config

    @property
    def config(self) -> PermissionConfig:
        return self._config

    def replace(self, config: PermissionConfig) -> None:
        self._config = config

    def policy_for(self, agent: str) -> AgentPolicy:
        return self._config.agents.get(agent, self._config.default_policy)

    def is_known(self, agent: str) -> bool:
        return agent in self._config.agents

    def require(self, agent: str, op: Operation) -> AgentPolicy:
        policy = self.policy_for(agent)
        if op not in policy.operations:
            raise PermissionDenied(
                f"agent '{agent}' is not allowed the '{op.value}' operation", field="agent"
            )
        return policy

    def check_write(self, agent: str, scope: str, mem_type: MemType) -> AgentPolicy:
        policy = self.require(agent, Operation.add)
        if not any_pattern_matches(policy.write, scope):
            raise PermissionDenied(
                f"agent '{agent}' cannot write to scope '{scope}'", field="scope"
            )
        if mem_type not in policy.types:
            raise PermissionDenied(
                f"agent '{agent}' cannot write mem_type '{mem_type.value}' "
                f"(allowed: {', '.join(t.value for t in policy.types) or 'none'})",
                field="mem_type",
            )
        return policy

    def can_read(self, agent: str, scope: str) -> bool:
        return any_pattern_matches(self.policy_for(agent).read, scope)

    def check_read(self, agent: str, scope: str, field: str = "scope") -> None:
        if not self.can_read(agent, scope):
            raise PermissionDenied(f"agent '{agent}' cannot read scope '{scope}'", field=field)

    def readable(self, agent: str) -> ScopeSelector:
        return selector_from_patterns(self.policy_for(agent).read)

    def plan_search(self, agent: str, scope: str) -> SearchPlan:
        """Resolve a search scope (concrete, ``all`` or ``cross:<id>``) into queries."""
        self.require(agent, Operation.search)
        if scope == "all":
            sel = self.readable(agent)
            if sel.is_empty():
                raise PermissionDenied(f"agent '{agent}' cannot read any scope", field="scope")
            return SearchPlan(queries=(sel,), searched=("all",))
        if scope.startswith("cross:"):
            group_id = scope[len("cross:") :]
            if ID_RE.fullmatch(group_id) is None:
                raise InvalidInput(
                    "scope",
                    "cross:<group-id> needs a group id of 1-128 characters of A-Z a-z 0-9 . _ -",
                )
            target = f"group:{group_id}"
        else:
            if not is_scope(scope):
                from engram_contract.scopes import SCOPE_RULE

                raise InvalidInput("scope", SCOPE_RULE + ", or 'all', or 'cross:<group-id>'")
            target = scope
        self.check_read(agent, target)
        if target != "global" and self.can_read(agent, "global"):
            return SearchPlan(
                queries=(ScopeSelector.of(target), ScopeSelector.of("global")),
                searched=(target, "global"),
            )
        return SearchPlan(queries=(ScopeSelector.of(target),), searched=(target,))

    def cap_trust(self, agent: str, requested: Trust) -> tuple[Trust, bool]:
        cap = self.policy_for(agent).max_trust
        if requested.rank > cap.rank:
            return cap, True
        return requested, False

    def check_source(self, agent: str, source: Source) -> None:
        if source is Source.user_direct and not self.policy_for(agent).allow_user_direct:
            raise PermissionDenied(
                f"agent '{agent}' may not claim source 'user_direct'; use agent_output, "
                "tool_result or inferred",
                field="source",
            )

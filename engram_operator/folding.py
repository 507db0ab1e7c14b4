"""Fold every EngramAgent into one permission config (pure; no API calls).

Rules that keep the config unambiguous:
- resources are considered oldest first (creationTimestamp, then namespace/name), so the first
  claim on an agent name, a ServiceAccount or a token wins and later claims are left out with a
  reason in their status, never merged;
- a resource being deleted, or whose spec is invalid, contributes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engram_contract.permissions import AgentPolicy, PermissionConfig
from engram_operator.models import AgentSpec, SpecError, parse_agent_spec
from engram_operator.naming import AGENT_KIND, API_VERSION, token_secret_name

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class TokenState:
    """What the operator knows of one agent's token Secret. Never holds the token itself."""

    sha256: str | None = None
    # Set when the Secret cannot be used: it belongs to someone else, or the API server refused
    # to read or write it (then `reason` is the server's, e.g. Forbidden).
    problem: str | None = None
    reason: str = "TokenSecretConflict"
    # The refusal may pass by itself (a 5xx, a timeout): worth retrying soon.
    transient: bool = False

    @property
    def pending(self) -> bool:
        return self.sha256 is None and self.problem is None


@dataclass(frozen=True)
class AgentSnapshot:
    """The parts of one EngramAgent that the fold needs, taken from a watch event."""

    uid: str
    namespace: str
    name: str
    created: datetime
    generation: int | None
    deleting: bool
    spec: AgentSpec | None
    spec_error: str | None
    status: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> AgentSnapshot:
        meta = body.get("metadata") or {}
        spec: AgentSpec | None
        try:
            spec = parse_agent_spec(body.get("spec") or {}, resource_name=str(meta.get("name")))
            error = None
        except SpecError as exc:
            spec, error = None, str(exc)
        generation = meta.get("generation")
        return cls(
            uid=str(meta.get("uid", "")),
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            created=_parse_time(meta.get("creationTimestamp")),
            generation=generation if isinstance(generation, int) else None,
            deleting=bool(meta.get("deletionTimestamp")),
            spec=spec,
            spec_error=error,
            status=dict(body.get("status") or {}),
        )

    @property
    def agent_name(self) -> str:
        if self.spec is not None and self.spec.agent_name:
            return self.spec.agent_name
        return self.name

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def token_enabled(self) -> bool:
        return self.spec is not None and self.spec.identity.token.enabled

    @property
    def token_secret(self) -> str | None:
        return token_secret_name(self.name) if self.token_enabled else None

    def as_body(self) -> dict[str, Any]:
        """Just enough of the resource to attach an event to it."""
        return {
            "apiVersion": API_VERSION,
            "kind": AGENT_KIND,
            "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid},
        }

    def order(self) -> tuple[datetime, str, str]:
        return (self.created, self.namespace, self.name)


@dataclass(frozen=True)
class Verdict:
    """How one agent fared in the fold; becomes its Ready condition."""

    ready: bool
    reason: str
    message: str
    agent_name: str | None = None
    token_secret: str | None = None


@dataclass(frozen=True)
class Fold:
    config: PermissionConfig
    verdicts: dict[str, Verdict]


def fold_agents(
    snapshots: Iterable[AgentSnapshot],
    tokens: Mapping[str, TokenState],
    *,
    configmap: str,
) -> Fold:
    """Build the permission config and one verdict per live agent (keyed by uid)."""
    policies: dict[str, AgentPolicy] = {}
    name_owner: dict[str, AgentSnapshot] = {}
    sa_owner: dict[tuple[str, str], AgentSnapshot] = {}
    token_owner: dict[str, AgentSnapshot] = {}
    verdicts: dict[str, Verdict] = {}

    for snap in sorted((s for s in snapshots if not s.deleting), key=AgentSnapshot.order):
        if snap.spec is None:
            verdicts[snap.uid] = Verdict(False, "InvalidSpec", snap.spec_error or "invalid spec")
            continue
        name = snap.agent_name
        secret = snap.token_secret

        def rejected(reason: str, message: str, snap: AgentSnapshot = snap) -> Verdict:
            return Verdict(
                False,
                reason,
                message + "; this resource is left out of the permission config",
                agent_name=snap.agent_name,
                token_secret=snap.token_secret,
            )

        if name in name_owner:
            other = name_owner[name]
            verdicts[snap.uid] = rejected(
                "DuplicateAgentName",
                f"agent name {name!r} is already declared by the older EngramAgent {other.ref}",
            )
            continue
        sas = [(sa.namespace, sa.name) for sa in snap.spec.identity.service_accounts]
        taken = [sa for sa in sas if sa in sa_owner]
        if taken:
            ns, sa_name = taken[0]
            verdicts[snap.uid] = rejected(
                "DuplicateServiceAccount",
                f"ServiceAccount {ns}/{sa_name} is already bound by the older EngramAgent "
                f"{sa_owner[taken[0]].ref}",
            )
            continue

        hashes: list[str] = []
        verdict = Verdict(
            True,
            "Configured",
            f"agent {name!r} is in ConfigMap {configmap}",
            agent_name=name,
            token_secret=secret,
        )
        if secret is not None:
            state = tokens.get(snap.uid, TokenState())
            secret_ref = f"{snap.namespace}/{secret}"
            if state.problem is not None:
                verdict = Verdict(False, state.reason, state.problem, name, secret)
            elif state.sha256 is None:
                verdict = Verdict(
                    False, "TokenPending", f"waiting for Secret {secret_ref}", name, secret
                )
            elif state.sha256 in token_owner:
                # Only possible if someone copied a token between Secrets; neither copy is trusted
                # for the later agent.
                verdict = Verdict(
                    False,
                    "DuplicateToken",
                    f"Secret {secret_ref} holds the token of EngramAgent "
                    f"{token_owner[state.sha256].ref}; delete the Secret to get a new token",
                    name,
                    secret,
                )
            else:
                hashes.append(state.sha256)
                token_owner[state.sha256] = snap

        policies[name] = snap.spec.policy(hashes)
        name_owner[name] = snap
        for sa in sas:
            sa_owner[sa] = snap
        verdicts[snap.uid] = verdict

    return Fold(config=PermissionConfig(agents=policies), verdicts=verdicts)


def _parse_time(value: object) -> datetime:
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return _FAR_FUTURE
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return _FAR_FUTURE

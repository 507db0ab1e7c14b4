"""Pydantic models of the custom resources' specs and of the run records kept in status.

They mirror ``manifests/crds/*.yaml`` (field names, bounds, defaults and the CEL rules), so a spec
that a real API server would have rejected is also rejected here: kmock does not validate, and an
operator must not trust that every API server did.
"""

from __future__ import annotations

from typing import Annotated, Final, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from engram_contract.permissions import (
    AGENT_NAME_RE,
    K8S_NAME_RE,
    AgentPolicy,
    MemType,
    Operation,
    ServiceAccountRef,
    Trust,
)
from engram_contract.report import RunResult, Task
from engram_contract.scopes import PATTERN_RULE, is_scope_pattern

NAMESPACE_RE: Final = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# Five cron fields or a predefined macro. Time zones go in spec.timeZone, never in the schedule.
CRON_RE: Final = (
    r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)"
    r"|[0-9A-Za-z*/,?-]+( [0-9A-Za-z*/,?-]+){4})$"
)
# spec.release: "<namespace>/<release>" or "<release>" (see ownership.py).
RELEASE_REF_RE: Final = (
    r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]{0,51}[a-z0-9])?$"
)
TIME_ZONE_RE: Final = r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$"
QUANTITY_RE: Final = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$"
# A schedule that never fires (30 February), for suspended resources without a schedule:
# a CronJob must have one.
NEVER_SCHEDULE: Final = "0 0 30 2 *"
DEFAULT_OPERATIONS: Final = (Operation.add, Operation.search, Operation.get_all, Operation.status)
DEFAULT_HISTORY_LIMIT: Final = 10
# Resource name limits (CEL rules on the CRDs): an agent's name goes into label values and its
# Secret's name; a maintenance's name is its CronJob's, whose Jobs add an 11-character suffix.
AGENT_RESOURCE_NAME_MAX: Final = 63
MAINTENANCE_RESOURCE_NAME_MAX: Final = 52
# The CRD bounds every count in status; a summary claiming more is clamped, not refused.
COUNT_MAX: Final = 1_000_000_000

_T = TypeVar("_T")


def _scope_pattern(value: str) -> str:
    if not is_scope_pattern(value):
        raise ValueError(f"scope pattern {value!r} {PATTERN_RULE}")
    return value


def _unique(values: list[_T]) -> list[_T]:
    if len(set(values)) != len(values):
        raise ValueError("entries must be unique")
    return values


ScopePattern = Annotated[str, StringConstraints(max_length=134), AfterValidator(_scope_pattern)]
Quantity = Annotated[str, StringConstraints(pattern=QUANTITY_RE, max_length=16)]
ReleaseRef = Annotated[str, StringConstraints(pattern=RELEASE_REF_RE, max_length=117)]


class SpecModel(BaseModel):
    # Unknown fields are ignored, not refused: a real API server prunes them before we see the
    # object, and refusing them would turn a newer CRD into an outage of every agent.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class TokenIdentity(SpecModel):
    enabled: bool = False


class ServiceAccountBinding(SpecModel):
    namespace: Annotated[str, StringConstraints(pattern=NAMESPACE_RE, max_length=63)]
    name: Annotated[str, StringConstraints(pattern=K8S_NAME_RE, max_length=253)]


class Identity(SpecModel):
    token: TokenIdentity = TokenIdentity()
    service_accounts: Annotated[
        list[ServiceAccountBinding], AfterValidator(_unique), Field(max_length=64)
    ] = []

    @model_validator(mode="after")
    def _some_identity(self) -> Identity:
        if not self.token.enabled and not self.service_accounts:
            raise ValueError(
                "an agent needs an identity: set token.enabled or bind serviceAccounts"
            )
        return self


class AgentSpec(SpecModel):
    release: ReleaseRef | None = None
    agent_name: Annotated[str, StringConstraints(pattern=AGENT_NAME_RE)] | None = None
    read: Annotated[list[ScopePattern], AfterValidator(_unique), Field(max_length=256)] = []
    write: Annotated[list[ScopePattern], AfterValidator(_unique), Field(max_length=256)] = []
    types: Annotated[list[MemType], AfterValidator(_unique), Field(max_length=7)] = list(MemType)
    operations: Annotated[list[Operation], AfterValidator(_unique), Field(max_length=6)] = list(
        DEFAULT_OPERATIONS
    )
    max_trust: Trust = Trust.medium
    allow_user_direct: bool = False
    identity: Identity

    @model_validator(mode="after")
    def _write_needs_add(self) -> AgentSpec:
        if self.write and Operation.add not in self.operations:
            raise ValueError("write scopes need the 'add' operation")
        return self

    def policy(self, token_hashes: list[str]) -> AgentPolicy:
        return AgentPolicy(
            read=list(self.read),
            write=list(self.write),
            types=list(self.types),
            operations=list(self.operations),
            max_trust=self.max_trust,
            allow_user_direct=self.allow_user_direct,
            token_sha256=token_hashes,
            service_accounts=[
                ServiceAccountRef(namespace=sa.namespace, name=sa.name)
                for sa in self.identity.service_accounts
            ],
        )


class Quantities(SpecModel):
    cpu: Quantity | None = None
    memory: Quantity | None = None


class Resources(SpecModel):
    requests: Quantities = Quantities()
    limits: Quantities = Quantities()


class Retention(SpecModel):
    keep: Annotated[int, Field(ge=1, le=1000)]


class MaintenanceSpec(SpecModel):
    release: ReleaseRef | None = None
    task: Task
    schedule: Annotated[str, StringConstraints(pattern=CRON_RE, max_length=128)] | None = None
    time_zone: Annotated[str, StringConstraints(pattern=TIME_ZONE_RE, max_length=64)] | None = None
    suspend: bool = False
    dry_run: bool = False
    retention: Retention | None = None
    history_limit: Annotated[int, Field(ge=1, le=100)] = DEFAULT_HISTORY_LIMIT
    resources: Resources = Resources()

    @model_validator(mode="after")
    def _cross_field(self) -> MaintenanceSpec:
        if self.schedule is None and not self.suspend:
            raise ValueError("schedule is required unless suspend is true")
        if self.dry_run and self.task is Task.backup:
            raise ValueError("dryRun is not supported for backup")
        if self.retention is not None and self.task is not Task.backup:
            raise ValueError("retention applies to backup only")
        return self

    @property
    def effective_schedule(self) -> str:
        return self.schedule if self.schedule is not None else NEVER_SCHEDULE


class RunRecord(SpecModel):
    """One finished maintenance Job, as kept in ``status.lastRun`` and ``status.history``."""

    job: Annotated[str, StringConstraints(max_length=253)]
    start_time: Annotated[str, StringConstraints(max_length=64)] | None = None
    completion_time: Annotated[str, StringConstraints(max_length=64)] | None = None
    result: RunResult
    merged: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 0
    archived: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 0
    created: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 0
    conflicts: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 0
    errors: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 0
    message: Annotated[str, StringConstraints(max_length=1024)] = ""

    def as_status(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class SpecError(ValueError):
    """A resource's spec breaks the CRD's rules; the message names each offending field."""


def parse_agent_spec(spec: object, *, resource_name: str) -> AgentSpec:
    """The spec of the EngramAgent called ``resource_name``, or :class:`SpecError`."""
    _check_name(resource_name, AGENT_RESOURCE_NAME_MAX, "it names the token Secret and labels")
    try:
        return AgentSpec.model_validate(spec)
    except ValidationError as exc:
        raise SpecError(_spec_message(exc)) from None


def parse_maintenance_spec(spec: object, *, resource_name: str) -> MaintenanceSpec:
    """The spec of the EngramMaintenance called ``resource_name``, or :class:`SpecError`."""
    _check_name(resource_name, MAINTENANCE_RESOURCE_NAME_MAX, "it names the CronJob")
    try:
        return MaintenanceSpec.model_validate(spec)
    except ValidationError as exc:
        raise SpecError(_spec_message(exc)) from None


def _check_name(name: str, limit: int, why: str) -> None:
    if len(name) > limit:
        raise SpecError(f"metadata.name must be at most {limit} characters ({why})")


def _spec_message(exc: ValidationError) -> str:
    """One ``spec.<field>: <rule>`` clause per problem, with the CRD's (camelCase) field names."""
    parts = []
    for err in exc.errors():
        loc = ".".join(["spec", *(str(p) for p in err["loc"])])
        parts.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)

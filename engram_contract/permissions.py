"""The permission-config document: who may do what, in which scopes.

The operator folds every EngramAgent into one of these and writes it, as YAML, into the
ConfigMap key :data:`CONFIGMAP_KEY`; the service loads it with :func:`load_permission_config`.
People running without the operator write the same file by hand. Tokens never appear here,
only their SHA-256 hex digests.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import Annotated, Any, Final

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from engram_contract.scopes import PATTERN_RULE, is_scope_pattern

CONFIGMAP_KEY: Final = "permissions.yaml"
FORMAT_VERSION: Final = 1
AGENT_NAME_RE: Final = r"^[A-Za-z0-9._-]{1,128}$"
K8S_NAME_RE: Final = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
SHA256_HEX_RE: Final = r"^[0-9a-f]{64}$"


class MemType(StrEnum):
    preference = "preference"
    fact = "fact"
    procedure = "procedure"
    lesson = "lesson"
    decision = "decision"
    task_log = "task_log"
    knowledge = "knowledge"


class Trust(StrEnum):
    low = "low"
    medium = "medium"
    high = "high"

    @property
    def rank(self) -> int:
        return {"low": 1, "medium": 2, "high": 3}[self.value]


class Operation(StrEnum):
    add = "add"
    search = "search"
    get_all = "get_all"
    status = "status"
    maintenance = "maintenance"
    # Archiving and restoring by id are both "forget": the same right over a memory's life.
    forget = "forget"


AgentName = Annotated[str, StringConstraints(pattern=AGENT_NAME_RE)]


class ServiceAccountRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    namespace: Annotated[str, StringConstraints(pattern=K8S_NAME_RE, max_length=63)]
    name: Annotated[str, StringConstraints(pattern=K8S_NAME_RE, max_length=253)]


def _check_patterns(values: list[str]) -> list[str]:
    # The position, not the value: a permission file's text is never echoed (a token pasted
    # into the wrong key would otherwise land in logs and /readyz).
    for n, v in enumerate(values):
        if not is_scope_pattern(v):
            raise ValueError(f"item {n}: a scope pattern {PATTERN_RULE}")
    return values


class AgentPolicy(BaseModel):
    """What one agent (or the default policy) may do."""

    model_config = ConfigDict(extra="forbid")

    read: list[str] = Field(default_factory=list, max_length=256)
    write: list[str] = Field(default_factory=list, max_length=256)
    types: list[MemType] = Field(default_factory=lambda: list(MemType))
    operations: list[Operation] = Field(default_factory=list)
    max_trust: Trust = Trust.medium
    allow_user_direct: bool = False
    token_sha256: list[Annotated[str, StringConstraints(pattern=SHA256_HEX_RE)]] = Field(
        default_factory=list, max_length=16
    )
    service_accounts: list[ServiceAccountRef] = Field(default_factory=list, max_length=64)

    @field_validator("read", "write")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        return _check_patterns(v)


def default_unknown_policy() -> AgentPolicy:
    """Unknown agents may search ``global`` and nothing else."""
    return AgentPolicy(read=["global"], operations=[Operation.search], max_trust=Trust.low)


class PermissionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = FORMAT_VERSION
    default_policy: AgentPolicy = Field(default_factory=default_unknown_policy)
    agents: dict[AgentName, AgentPolicy] = Field(default_factory=dict)

    @field_validator("version")
    @classmethod
    def _version(cls, v: int) -> int:
        if v != FORMAT_VERSION:
            raise ValueError(
                f"unsupported permission config version {v}; expected {FORMAT_VERSION}"
            )
        return v

    @model_validator(mode="after")
    def _unique_credentials(self) -> PermissionConfig:
        seen_tokens: dict[str, str] = {}
        seen_sas: dict[ServiceAccountRef, str] = {}
        for name, policy in self.agents.items():
            for digest in policy.token_sha256:
                if digest in seen_tokens:
                    raise ValueError(
                        f"agents.{name}.token_sha256: token already belongs to agent "
                        f"{seen_tokens[digest]!r}"
                    )
                seen_tokens[digest] = name
            for sa in policy.service_accounts:
                if sa in seen_sas:
                    raise ValueError(
                        f"agents.{name}.service_accounts: {sa.namespace}/{sa.name} is already "
                        f"bound to agent {seen_sas[sa]!r}"
                    )
                seen_sas[sa] = name
        if self.default_policy.token_sha256 or self.default_policy.service_accounts:
            raise ValueError("default_policy: may not hold tokens or service accounts")
        return self

    def uses_tokens(self) -> bool:
        return any(p.token_sha256 or p.service_accounts for p in self.agents.values())


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_permission_config(text: str) -> PermissionConfig:
    """Parse a YAML document; raises ``ValueError`` naming the line, the key and the rule.

    The message never quotes the document (PyYAML's own messages print the offending line,
    which may hold a plaintext token pasted by mistake).
    """
    from pydantic import ValidationError

    try:
        raw: Any = yaml.safe_load(text) if text.strip() else {}
    except yaml.MarkedYAMLError as exc:
        raise ValueError(_yaml_problem(exc)) from None
    except yaml.YAMLError:
        raise ValueError("not valid YAML") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(
            "line 1: permission config must be a mapping with 'agents' and 'default_policy'"
        )
    try:
        return PermissionConfig.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, text=text)) from None


def _yaml_problem(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    # PyYAML's problem sentences are fixed phrases, but some quote what they found.
    problem = re.sub(r"'[^']*'|\"[^\"]*\"", "…", exc.problem or "syntax error")
    return f"{where}not valid YAML ({problem})"


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the deepest key of ``loc`` found in the YAML document."""
    try:
        node: Any = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line: int | None = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if getattr(k, "value", None) == str(part)]
            if not found:
                break
            key, node = found[0]
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def dump_permission_config(config: PermissionConfig) -> str:
    data = config.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False)


def format_validation_error(exc: Any, *, text: str | None = None) -> str:
    """One line per problem: ``dotted.key: message``, after ``line N: `` when the document's
    text is given. Agent names that break the naming rule are not echoed."""
    lines = []
    for err in exc.errors(include_input=False, include_url=False):
        parts = list(err["loc"])
        if parts and parts[-1] == "[key]":
            parts[-2] = "(invalid agent name)"
        loc = ".".join(str(p) for p in parts) or "(root)"
        msg = re.sub(r"^Value error, ", "", err["msg"])
        line = _line_of(text, tuple(err["loc"])) if text is not None else None
        lines.append(f"line {line}: {loc}: {msg}" if line is not None else f"{loc}: {msg}")
    return "; ".join(lines)


def builtin_permission_config() -> PermissionConfig:
    """The prototype's agents, used when no permission file is configured."""
    every_op_but_maintenance = [
        Operation.add,
        Operation.search,
        Operation.get_all,
        Operation.status,
        Operation.forget,
    ]
    everywhere = ["global", "dm", "dm:*", "group:*", "agent:*"]
    return PermissionConfig(
        agents={
            "main": AgentPolicy(
                read=list(everywhere),
                write=["global", "group:*", "dm", "dm:*"],
                operations=every_op_but_maintenance,
                max_trust=Trust.high,
                allow_user_direct=True,
            ),
            "devops": AgentPolicy(
                read=list(everywhere),
                write=list(everywhere),
                operations=[*every_op_but_maintenance, Operation.maintenance],
                max_trust=Trust.high,
                allow_user_direct=True,
            ),
        }
    )

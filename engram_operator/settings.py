"""Operator settings: ``ENGRAM_OPERATOR_*`` environment variables, built once in ``main()``."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from engram_contract.permissions import K8S_NAME_RE

# Namespace names are DNS labels. Globs are refused on purpose: kopf would then need to list and
# watch every namespace, a right the operator otherwise never uses.
NAMESPACE_RE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
IMAGE_RE = r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$"


class OperatorSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_OPERATOR_", extra="ignore", populate_by_name=True
    )

    # Comma-separated namespaces to watch; empty watches the whole cluster.
    namespaces: Annotated[list[str], NoDecode] = Field(default_factory=list, max_length=256)
    # The permission ConfigMap the MCP service mounts (the chart sets `<fullname>-permissions`).
    configmap_name: str = Field(default="engram-permissions", pattern=K8S_NAME_RE, max_length=253)
    # Where that ConfigMap lives; falls back to the operator pod's own namespace.
    configmap_namespace: str = Field(
        pattern=NAMESPACE_RE,
        validation_alias=AliasChoices("ENGRAM_OPERATOR_CONFIGMAP_NAMESPACE", "POD_NAMESPACE"),
    )
    # The Engram image that maintenance CronJobs run.
    image: str = Field(pattern=IMAGE_RE)
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    # ServiceAccount for maintenance pods; it needs no API rights (its token is not mounted).
    job_service_account: str = Field(default="", pattern=r"^$|" + K8S_NAME_RE, max_length=253)
    # envFrom sources for maintenance pods: the service's non-secret env and the Qdrant key.
    job_env_configmap: str = Field(default="", pattern=r"^$|" + K8S_NAME_RE, max_length=253)
    job_env_secret: str = Field(default="", pattern=r"^$|" + K8S_NAME_RE, max_length=253)
    # The numeric user (and group, fsGroup) maintenance pods run as; must match the image.
    job_uid: int = Field(default=10001, ge=1, le=2_147_483_647)
    # Claim mounted at /var/lib/engram/backups in backup jobs; empty = an emptyDir.
    backup_pvc: str = Field(default="", pattern=r"^$|" + K8S_NAME_RE, max_length=253)
    # Liveness endpoint (GET /healthz).
    health_host: str = Field(default="0.0.0.0", max_length=253)
    health_port: int = Field(default=8080, ge=1, le=65535)
    # How often each resource is re-checked for drift: deleted Secrets, edited CronJobs,
    # Jobs whose end the watch missed.
    resync_seconds: float = Field(default=300.0, gt=0, le=86_400)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "plain"] = "json"

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("namespaces", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        for ns in value:
            if not re.fullmatch(NAMESPACE_RE, ns):
                raise ValueError(f"{ns!r} is not a namespace name (globs are not supported)")
        return sorted(set(value))

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


# Variables other than ENGRAM_OPERATOR_<FIELD> that a field reads.
_ENV_NAMES = {"configmap_namespace": "ENGRAM_OPERATOR_CONFIGMAP_NAMESPACE or POD_NAMESPACE"}


def settings_problems(exc: ValidationError) -> list[str]:
    """One line per bad setting, naming the environment variable to fix."""
    problems = []
    for err in exc.errors():
        loc = str(err["loc"][0]) if err["loc"] else ""
        field = loc.removeprefix("ENGRAM_OPERATOR_").lower()
        env = _ENV_NAMES.get(field, "ENGRAM_OPERATOR_" + field.upper())
        problems.append(f"{field} ({env}): {err['msg'].removeprefix('Value error, ')}")
    return problems

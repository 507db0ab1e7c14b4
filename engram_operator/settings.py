"""Operator settings: ``ENGRAM_OPERATOR_*`` environment variables, built once in ``main()``."""

from __future__ import annotations

import re
from typing import Annotated, Literal, NamedTuple

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from engram_contract.jobs import BACKUP_DIR_ENV, BACKUP_KEEP_ENV
from engram_contract.permissions import K8S_NAME_RE

# Namespace names are DNS labels. Globs are refused on purpose: kopf would then need to list and
# watch every namespace, a right the operator otherwise never uses.
NAMESPACE_RE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
IMAGE_RE = r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$"
# A Helm release name (at most 53 characters of a DNS subdomain).
RELEASE_RE = r"^[a-z0-9]([-a-z0-9.]{0,51}[a-z0-9])?$"
# What Kubernetes accepts as a Secret key, and the environment variable names we pass on.
SECRET_KEY_RE = r"^[-._a-zA-Z0-9]{1,253}$"
ENV_NAME_RE = r"^[A-Za-z_][A-Za-z0-9_]{0,252}$"
# Set by the CronJob builder itself; a Secret reference must not shadow them.
RESERVED_JOB_ENV = frozenset({"ENGRAM_DATA_DIR", BACKUP_KEEP_ENV, BACKUP_DIR_ENV})


class SecretKeyEnv(NamedTuple):
    """One environment variable of maintenance pods taken from a key of a Secret.

    Only names travel through the settings; the value is resolved by the kubelet.
    """

    env: str
    secret: str
    key: str

    @classmethod
    def parse(cls, item: str) -> SecretKeyEnv:
        # Errors name the variable only: a mistaken entry may hold the key itself, and these
        # messages go to the operator's log.
        env, sep, ref = item.partition("=")
        env = env.strip()
        if not sep or not re.fullmatch(ENV_NAME_RE, env):
            raise ValueError("an entry is not VARIABLE=secret:key (not shown: it may hold a key)")
        secret, colon, key = (part.strip() for part in ref.partition(":"))
        if not colon:
            raise ValueError(f"{env}: expected VARIABLE=secret:key")
        if not re.fullmatch(K8S_NAME_RE, secret):
            raise ValueError(f"{env}: the Secret name is not valid")
        if not re.fullmatch(SECRET_KEY_RE, key):
            raise ValueError(f"{env}: the Secret key is not valid")
        return cls(env, secret, key)


def _split_commas(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class OperatorSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_OPERATOR_", extra="ignore", populate_by_name=True
    )

    # The Helm release this operator serves (its namespace is configmap_namespace). It acts only
    # on the EngramAgents and EngramMaintenances that belong to it (see ownership.py).
    release: str = Field(default="engram", pattern=RELEASE_RE, max_length=53)
    # Comma-separated namespaces to watch (the release namespace is always added). The operator
    # holds Roles in each of them and nowhere else.
    namespaces: Annotated[list[str], NoDecode] = Field(default_factory=list, max_length=256)
    # Watch the custom resources in every namespace (a ClusterRole on them alone); token Secrets
    # are still made only in `namespaces`, where the operator holds Secret rights.
    watch_all: bool = False
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
    # envFrom sources for maintenance pods: the service's non-secret env and Secrets whose keys
    # are already ENGRAM_* names (the Qdrant key). job_env_secret is the older single-Secret
    # form; both are used, job_env_secret first.
    job_env_configmap: str = Field(default="", pattern=r"^$|" + K8S_NAME_RE, max_length=253)
    job_env_secret: str = Field(default="", pattern=r"^$|" + K8S_NAME_RE, max_length=253)
    job_env_secrets: Annotated[list[str], NoDecode] = Field(default_factory=list, max_length=64)
    # Single variables from Secret keys, "VARIABLE=secret:key,...": the provider API keys,
    # whose Secrets hold them under a key of the user's choosing. Passed as secretKeyRefs.
    job_secret_env: Annotated[list[SecretKeyEnv], NoDecode] = Field(
        default_factory=list, max_length=64
    )
    # The one namespace where maintenance may run: the env ConfigMap, the Secrets, the backup
    # claim and the job ServiceAccount are there, and pods cannot load them across namespaces.
    # Falls back to the operator pod's namespace, then to configmap_namespace.
    job_namespace: str = Field(
        default="",
        pattern=r"^$|" + NAMESPACE_RE,
        validation_alias=AliasChoices("ENGRAM_OPERATOR_JOB_NAMESPACE", "POD_NAMESPACE"),
    )
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

    @field_validator("namespaces", "job_env_secrets", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return _split_commas(value)

    @field_validator("job_env_secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(K8S_NAME_RE, name):
                raise ValueError(f"{name!r} is not a Secret name")
        return list(dict.fromkeys(value))

    @field_validator("job_secret_env", mode="before")
    @classmethod
    def _parse_refs(cls, value: object) -> object:
        value = _split_commas(value)
        if isinstance(value, list):
            return [SecretKeyEnv.parse(item) if isinstance(item, str) else item for item in value]
        return value

    @field_validator("job_secret_env")
    @classmethod
    def _unique_refs(cls, value: list[SecretKeyEnv]) -> list[SecretKeyEnv]:
        seen: set[str] = set()
        for ref in value:
            if ref.env in RESERVED_JOB_ENV:
                raise ValueError(f"{ref.env} is set by the operator itself")
            if ref.env in seen:
                raise ValueError(f"{ref.env} is given twice")
            seen.add(ref.env)
        return value

    @model_validator(mode="after")
    def _default_job_namespace(self) -> OperatorSettings:
        if not self.job_namespace:
            self.job_namespace = self.configmap_namespace
        # The release namespace holds the ConfigMap, the CronJobs and the chart's own resources:
        # always watched.
        self.namespaces = sorted({*self.namespaces, self.configmap_namespace, self.job_namespace})
        return self

    @property
    def release_namespace(self) -> str:
        return self.configmap_namespace

    @property
    def release_ref(self) -> str:
        """How a resource names this release in ``spec.release``: ``<namespace>/<name>``."""
        return f"{self.release_namespace}/{self.release}"

    @property
    def job_env_secret_names(self) -> list[str]:
        """Every envFrom Secret of maintenance pods, in order, without repeats."""
        names = [self.job_env_secret] if self.job_env_secret else []
        return list(dict.fromkeys([*names, *self.job_env_secrets]))

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        for ns in value:
            if not re.fullmatch(NAMESPACE_RE, ns):
                raise ValueError(f"{ns!r} is not a namespace name (globs are not supported)")
        return sorted(set(value))

    @property
    def clusterwide(self) -> bool:
        return self.watch_all


# Variables other than ENGRAM_OPERATOR_<FIELD> that a field reads.
_ENV_NAMES = {
    "configmap_namespace": "ENGRAM_OPERATOR_CONFIGMAP_NAMESPACE or POD_NAMESPACE",
    "job_namespace": "ENGRAM_OPERATOR_JOB_NAMESPACE or POD_NAMESPACE",
}


def settings_problems(exc: ValidationError) -> list[str]:
    """One line per bad setting, naming the environment variable to fix."""
    problems = []
    for err in exc.errors():
        loc = str(err["loc"][0]) if err["loc"] else ""
        field = loc.removeprefix("ENGRAM_OPERATOR_").lower()
        env = _ENV_NAMES.get(field, "ENGRAM_OPERATOR_" + field.upper())
        problems.append(f"{field} ({env}): {err['msg'].removeprefix('Value error, ')}")
    return problems

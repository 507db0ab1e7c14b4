"""Process settings: ``ENGRAM_*`` environment variables over an optional YAML file.

Built once in ``main()`` and passed down; nothing reads settings at import time.
Nested keys use ``__`` in the environment, e.g. ``ENGRAM_STORE__URL``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from engram_api.embeddings.config import EmbeddingSettings
from engram_api.llm.config import LLMSettings
from engram_api.maintenance.config import MaintenanceSettings


def default_data_dir() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "engram"


class StoreSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # embedded: qdrant-edge in the data dir. server: a Qdrant server at `url`.
    mode: Literal["embedded", "server", "local-client"] = "embedded"
    url: str = Field(default="", max_length=2048)
    api_key: SecretStr | None = None
    collection: str = Field(default="memories", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    # dense | sparse | hybrid (dense + BM25 fused with reciprocal rank fusion)
    search_mode: Literal["dense", "sparse", "hybrid"] = "hybrid"
    # Embedded store only: score every candidate with full-precision vectors (recall 1.0, no
    # graph, several times slower at 100k) instead of int8 copies with the best candidates
    # rescored exactly (0.99-0.997 of the exact top 5 at 100k). Unset: exact for the hash
    # embedder, a test stand-in whose feature-hashed vectors are mostly zeros.
    exact_search: bool | None = None
    # Embedded store only: once this many points are not yet in the HNSW graph, `engram serve`
    # and `engram stdio` build it in a child process and swap it in (0: never). Below it a
    # search scans the unindexed points (~0.6 ms at 10k).
    index_threshold: int = Field(default=20_000, ge=0, le=100_000_000)


class LimitSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content_max_chars: int = Field(default=8000, ge=1, le=100_000)
    context_max_chars: int = Field(default=2000, ge=0, le=100_000)
    search_limit_max: int = Field(default=50, ge=1, le=500)
    page_limit_max: int = Field(default=200, ge=1, le=1000)


class QueueSettings(BaseModel):
    """The durable write queue's retry policy (by time: attempts are never counted to death)."""

    model_config = ConfigDict(extra="forbid")

    # An entry not stored within this long moves to dead letters; nothing else but a permanent
    # refusal does.
    max_age_s: float = Field(default=24 * 3600.0, gt=0, le=30 * 24 * 3600.0)
    # Backoff of the head entry after a failed replay: doubling from base to max, jittered.
    base_delay_s: float = Field(default=0.5, gt=0, le=60)
    max_delay_s: float = Field(default=60.0, gt=0, le=3600)


class GuardSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Extra regular expressions that mark a secret: Rust regex syntax (linear time: no
    # look-around or back-references), matched case-insensitively. See docs/configuration.md.
    extra_secret_patterns: list[str] = Field(default_factory=list, max_length=256)


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)
    # Refuse to serve a non-loopback address without authentication unless this is set.
    insecure_no_auth: bool = False
    # Host/Origin allow-lists (DNS-rebinding protection). Empty on a loopback bind: the
    # loopback names; empty on any other bind: not checked (bearer auth guards the service).
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    max_request_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576)
    # How often the permission file is checked for changes.
    permissions_poll_s: float = Field(default=2.0, gt=0, le=300)
    # /readyz embeds a probe text at most this often (remote providers bill per call).
    readiness_probe_ttl_s: float = Field(default=30.0, ge=0, le=3600)
    # /metrics has a listener of its own (never the MCP port, so it is never routed through
    # the Ingress with /mcp); port 0 turns it off. Loopback by default; the chart binds all
    # addresses for Prometheus, and the NetworkPolicy says who may reach it.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    # Scope labels of engram_memories_by_scope: "kind" (global, dm, dm:*, group:*, agent:*);
    # "name" lists every scope (dm:alice, agent:bob, ...), which tells a scraper who has
    # memories, so it is opt-in.
    metrics_scope_labels: Literal["kind", "name"] = "kind"
    # With names: at most this many scope labels (the rest are summed as scope="_other").
    metrics_max_scopes: int = Field(default=100, ge=1, le=10_000)
    # Memory counts are recomputed at most this often, however often /metrics is scraped.
    metrics_cache_s: float = Field(default=10.0, ge=1, le=3600)

    @model_validator(mode="after")
    def _separate_ports(self) -> ServerSettings:
        if self.metrics_port and self.metrics_port == self.port:
            raise ValueError(
                "metrics_port must differ from port: /metrics has a listener of its own"
            )
        return self


class KubernetesAuthSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Accept ServiceAccount tokens, checked with the TokenReview API.
    enabled: bool = False
    audience: str = Field(default="", max_length=253)
    cache_ttl_s: float = Field(default=60.0, ge=0, le=3600)
    # Empty: in-cluster config (else ~/.kube/config). Set it for `kubectl proxy` or tests.
    api_url: str = Field(default="", max_length=2048)
    timeout_s: float = Field(default=5.0, gt=0, le=60)
    cache_max_entries: int = Field(default=4096, ge=0, le=1_000_000)


class EngramSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_",
        env_nested_delimiter="__",
        extra="forbid",
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    # YAML permission document (engram_contract.permissions); empty = the built-in agents.
    permissions_file: Path | None = None
    store: StoreSettings = Field(default_factory=StoreSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    guards: GuardSettings = Field(default_factory=GuardSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    kubernetes_auth: KubernetesAuthSettings = Field(default_factory=KubernetesAuthSettings)
    # The LLM used by maintenance only (re-extraction, conflicts, consolidation); none by default.
    llm: LLMSettings = Field(default_factory=LLMSettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return v.expanduser()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives as init kwargs; the environment overrides it.
        return env_settings, init_settings


class SettingsError(ValueError):
    """Settings could not be loaded; the message names each bad key."""


def _key_name(loc: tuple[Any, ...]) -> str:
    dotted = ".".join(str(p) for p in loc)
    env = "ENGRAM_" + "__".join(str(p).upper() for p in loc)
    return f"{dotted} (env {env})"


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> EngramSettings:
    """Build settings from ``config_file`` (or ``ENGRAM_CONFIG``) and the environment."""
    path = config_file or os.environ.get("ENGRAM_CONFIG") or None
    data: dict[str, Any] = {}
    if path:
        p = Path(path).expanduser()
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise SettingsError(f"config file {p}: cannot read ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            raise SettingsError(f"config file {p}: not valid YAML ({exc})") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise SettingsError(f"config file {p}: must be a mapping of settings keys")
        data = loaded or {}
    data.update(overrides)
    try:
        return EngramSettings(**data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown setting"
            problems.append(f"{_key_name(tuple(err['loc']))}: {msg}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None

"""Embedding configuration (a section of the process settings)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

ProviderName = Literal["local", "hash", "gemini", "openai"]


class ProviderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: ProviderName = "local"
    # Provider-specific model name; empty means the provider's default.
    model: str = Field(default="", max_length=256)
    # Output dimension; 0 means the model's native dimension.
    dimension: int = Field(default=0, ge=0, le=8192)
    base_url: str = Field(default="", max_length=2048)
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    # local provider: override the ONNX model path (default: the file shipped in the PyPI package).
    model_path: str = Field(default="", max_length=4096)


class EmbeddingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    primary: ProviderSettings = Field(default_factory=ProviderSettings)
    fallback: ProviderSettings | None = None

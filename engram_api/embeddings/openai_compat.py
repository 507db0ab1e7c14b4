"""Embeddings from any OpenAI-compatible API through the openai SDK (OpenAI, vLLM, Ollama, TEI)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from engram_api.embeddings.base import EmbeddingConfigError, EmbeddingError, Vector
from engram_api.embeddings.vectors import unit_vectors
from engram_api.remote import openai_sdk

DEFAULT_MODEL: Final = "text-embedding-3-small"
NATIVE_DIMENSIONS: Final = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# Models that accept the `dimensions` parameter (Matryoshka-trained).
_SHORTENABLE_PREFIX: Final = "text-embedding-3"
DEFAULT_BATCH: Final = 256


class OpenAICompatEmbedder:
    def __init__(
        self,
        *,
        api_key: str | None,
        model: str = "",
        dimension: int = 0,
        base_url: str = "",
        timeout_s: float = 10.0,
        batch_size: int = 0,
    ) -> None:
        self._model = model or DEFAULT_MODEL
        native = NATIVE_DIMENSIONS.get(self._model)
        if not dimension and native is None:
            raise EmbeddingConfigError(
                f"openai-compatible model {self._model!r} has no known dimension: set the "
                "provider's dimension to the model's output size (e.g. "
                "ENGRAM_EMBEDDINGS__PRIMARY__DIMENSION=768)"
            )
        self._dim = dimension or int(native or 0)
        shortenable = self._model.startswith(_SHORTENABLE_PREFIX)
        self._send_dimensions = shortenable and bool(dimension) and dimension != native
        self._batch = batch_size or DEFAULT_BATCH
        self._key = api_key
        self._client = openai_sdk.make_client(
            base_url=base_url, api_key=api_key, timeout_s=timeout_s
        )

    @property
    def model_id(self) -> str:
        return f"openai/{self._model}"

    @property
    def dimension(self) -> int:
        return self._dim

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        out: list[Vector] = []
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start : start + self._batch])
            try:
                if self._send_dimensions:
                    response = await self._client.embeddings.create(
                        model=self._model,
                        input=chunk,
                        dimensions=self._dim,
                        encoding_format="float",
                    )
                else:
                    response = await self._client.embeddings.create(
                        model=self._model, input=chunk, encoding_format="float"
                    )
                # Servers may answer out of order; `index` says which input each row is.
                rows = sorted(response.data, key=lambda d: d.index)
                if [d.index for d in rows] != list(range(len(chunk))):
                    raise EmbeddingError(
                        "openai-compatible embeddings: answer indexes do not match the inputs",
                        kind="malformed",
                    )
                raw = [d.embedding for d in rows]
            except EmbeddingError:
                raise
            except Exception as exc:
                failure = openai_sdk.failure_from(exc, secret=self._key)
                raise EmbeddingError(
                    f"openai-compatible embeddings: {failure.detail}", kind=failure.kind
                ) from None
            out.extend(unit_vectors(raw, expected=len(chunk), dimension=self._dim))
        return out

    async def embed_query(self, text: str) -> Vector:
        return (await self.embed_documents([text]))[0]

    async def aclose(self) -> None:
        await self._client.close()

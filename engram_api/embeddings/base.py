"""The embedder interface every provider implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from engram_api.resilience import TRANSIENT_KINDS, FailureKind

Vector = npt.NDArray[np.float32]


class EmbeddingError(RuntimeError):
    """A provider failed at run time (timeout, 5xx, quota, connection, unusable answer).

    ``retryable`` tells a caller whether the same request may succeed later without a change
    (true for outages); false means the input or the configuration must change first (bad key,
    rejected input). ``kind`` names the failure (see :data:`engram_api.resilience.FailureKind`).
    Messages never carry keys or the text being embedded.
    """

    def __init__(
        self, message: str, *, retryable: bool | None = None, kind: FailureKind = "server"
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = kind in TRANSIENT_KINDS if retryable is None else retryable


class EmbeddingConfigError(ValueError):
    """The embedding configuration cannot work (found at startup): the message says what to do."""


@runtime_checkable
class Embedder(Protocol):
    @property
    def model_id(self) -> str:
        """Stable identifier recorded on every memory, e.g. ``local/all-MiniLM-L6-v2-int8``."""
        ...

    @property
    def dimension(self) -> int: ...

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """One unit-length vector per text, in order."""
        ...

    async def embed_query(self, text: str) -> Vector: ...

    async def aclose(self) -> None: ...

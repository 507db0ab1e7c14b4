"""The embedder interface every provider implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


class EmbeddingError(RuntimeError):
    """A provider failed at run time (timeout, 5xx, quota, connection).

    ``retryable`` tells a chain whether another attempt or provider may succeed.
    """

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


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

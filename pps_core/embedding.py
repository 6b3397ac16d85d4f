"""The embedder contract shared by every layer that wants vectors."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors. Provided by the ``pps_embedder`` hook."""

    name: str
    dimension: int

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed a batch of texts (blocking; call from a worker thread on hot async paths)."""
        ...

"""An OpenAI-compatible ``/embeddings`` endpoint (Ollama, vLLM, llama.cpp, a cloud API) as the embedder."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pps_core.errors import Unavailable

if TYPE_CHECKING:  # pragma: no cover
    from .settings import EmbeddingSettings


class EmbeddingError(Unavailable, RuntimeError):
    """The endpoint failed or answered something that is not a list of vectors: callers get a 503
    naming the endpoint, not an unexpected failure."""


class OpenAIEmbedder:
    """Posts batches to ``{base_url}/embeddings``; vectors are checked for length and L2-normalised."""

    def __init__(self, base_url: str, model: str, dimension: int, *, api_key: str | None = None,
                 timeout_s: float = 30.0, batch_size: int = 64) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.name = f"openai:{model}"
        self.dimension = dimension
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.batch_size = batch_size

    @classmethod
    def from_settings(cls, s: EmbeddingSettings) -> OpenAIEmbedder:
        return cls(s.base_url, s.model, s.dimension, api_key=s.api_key.get_secret_value() if s.api_key else None,
                   timeout_s=s.timeout_s, batch_size=s.batch_size)

    def embed(self, texts: list[str]) -> list[list[float]]:
        import httpx

        texts = list(texts)
        if not texts:
            return []
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        out: list[list[float]] = []
        # trust_env=False: proxy variables never reroute the configured endpoint (or a loopback one).
        with httpx.Client(timeout=self.timeout_s, headers=headers, trust_env=False) as client:
            for start in range(0, len(texts), self.batch_size):
                out.extend(self._batch(client, texts[start:start + self.batch_size]))
        return out

    def _batch(self, client, batch: list[str]) -> list[list[float]]:
        import httpx

        try:
            resp = client.post(self.url, json={"model": self.model, "input": batch})
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"embedding endpoint {self.url} failed: {type(exc).__name__}: {exc}") from None
        if resp.status_code != 200:
            raise EmbeddingError(f"embedding endpoint {self.url} answered HTTP {resp.status_code}: "
                                 f"{resp.text[:200]}")
        try:
            data = sorted(resp.json()["data"], key=lambda d: d["index"])
            vectors = [[float(x) for x in d["embedding"]] for d in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embedding endpoint {self.url} answered an unexpected body: {exc}") from None
        if len(vectors) != len(batch):
            raise EmbeddingError(f"embedding endpoint {self.url} returned {len(vectors)} vectors for "
                                 f"{len(batch)} texts")
        for v in vectors:
            if len(v) != self.dimension:
                raise EmbeddingError(f"embedding endpoint {self.url} returned {len(v)}-dimensional vectors; "
                                     f"embeddings.dimension is {self.dimension}")
        return [_normalise(v) for v in vectors]


def _normalise(v: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v] if norm > 0 else v

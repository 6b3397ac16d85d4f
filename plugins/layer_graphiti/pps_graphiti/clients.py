"""What graphiti is handed explicitly: our embedder, a no-LLM cross-encoder, the entity's LLM (if any)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.embedder.client import EmbedderClient

if TYPE_CHECKING:  # pragma: no cover
    from graphiti_core.llm_client import LLMClient
    from pps_llm.settings import LLMSettings

    from pps_core.embedding import Embedder


class PPSEmbedder(EmbedderClient):
    """graphiti's EmbedderClient over the entity's shared embedder (the ``pps_embedder`` hook).

    Embedding is blocking CPU work, so it runs in a worker thread; one-text calls (every query)
    are cached briefly because a recall embeds the same context once per search scope.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._cache: dict[str, list[float]] = {}

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        if isinstance(input_data, list) and input_data and isinstance(input_data[0], str):
            text = input_data[0]
        elif isinstance(input_data, str):
            text = input_data
        else:
            raise TypeError("PPSEmbedder embeds text only")
        hit = self._cache.get(text)
        if hit is None:
            hit = (await asyncio.to_thread(self.embedder.embed, [text]))[0]
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[text] = hit
        return list(hit)

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        if not input_data_list:
            return []
        return [list(v) for v in await asyncio.to_thread(self.embedder.embed, list(input_data_list))]


class PassthroughReranker(CrossEncoderClient):
    """A cross-encoder that calls no model: it keeps the order it is given.

    Our search recipes rerank with RRF and our own rankers, never graphiti's cross-encoder; this
    stops graphiti from building its default OpenAI reranker (a network call) behind our back.
    """

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        n = len(passages)
        return [(p, 1.0 - i / max(n, 1)) for i, p in enumerate(passages)]


def _no_llm_class():
    from graphiti_core.llm_client.client import LLMClient
    from graphiti_core.llm_client.config import LLMConfig

    class NoLLM(LLMClient):
        """Stands in for graphiti's LLM client when none is configured: any use is a clear error."""

        def __init__(self) -> None:
            super().__init__(LLMConfig(api_key="none", model="none"), cache=False)

        async def _generate_response(self, *args, **kwargs):
            from pps_core.errors import Unavailable

            from .settings import NO_LLM

            raise Unavailable(NO_LLM)

    return NoLLM


def build_llm(llm: LLMSettings) -> LLMClient:
    if not llm.configured:
        return _no_llm_class()()
    from graphiti_core.llm_client.config import LLMConfig
    from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient
    from openai import AsyncOpenAI

    config = LLMConfig(api_key=llm.api_key or "not-needed", model=llm.model, small_model=llm.model,
                       base_url=llm.base_url)
    client = AsyncOpenAI(api_key=config.api_key, base_url=llm.base_url, timeout=llm.timeout_s, max_retries=1)
    return OpenAIGenericClient(config=config, client=client, structured_output_mode="json_schema")

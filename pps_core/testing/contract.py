"""The layer contract: behaviour every layer plugin, ours or a third party's, must show.

Its tests are marked for pytest-asyncio and its fixtures are pytest-asyncio fixtures, so they run in
pytest-asyncio's default (strict) mode as well as in ``asyncio_mode = "auto"``: a plugin needs no config.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from pps_core.layer import Layer
from pps_core.memory import Memory
from pps_core.models import LayerHealth, SearchResult

MakeMemory = Callable[..., Awaitable[Memory]]

CORPUS = [
    "The lighthouse keeper painted the old door a bright cobalt blue.",
    "Quarterly tax filing is due at the end of the month.",
    "We adopted a grey kitten and named her Pixel.",
]


class LayerContract:
    """Subclass as ``TestXContract`` and set ``plugins``, ``layer_name``; implement ``add_items``."""

    pytestmark = pytest.mark.asyncio

    plugins: list[str] = []
    layer_name: str = ""
    settings: dict[str, Any] = {}
    #: False for layers without recency (the graph): skips the recent() checks.
    has_recency: bool = True

    async def add_items(self, memory: Memory, texts: list[str]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def layer_of(self, memory: Memory) -> Layer:
        """The layer under test, loaded."""
        layer = memory.layer(self.layer_name)
        assert layer is not None, f"{self.layer_name} not loaded by plugins {self.plugins}"
        return layer

    @pytest_asyncio.fixture
    async def memory(self, make_memory: MakeMemory) -> Memory:
        return await make_memory(plugins=list(self.plugins), **self.settings)

    @pytest_asyncio.fixture
    async def filled(self, memory: Memory) -> Memory:
        await self.add_items(memory, CORPUS)
        return memory

    async def test_layer_is_loaded_and_healthy(self, memory: Memory) -> None:
        layer = self.layer_of(memory)
        health = await layer.health()
        assert isinstance(health, LayerHealth)
        assert health.layer == self.layer_name and health.available, health.detail

    async def test_empty_store_searches_to_nothing(self, memory: Memory) -> None:
        assert await self.layer_of(memory).search("lighthouse", 5) == []

    async def test_search_finds_what_was_added(self, filled: Memory) -> None:
        results = await self.layer_of(filled).search("lighthouse keeper door", 3)
        assert results and all(isinstance(r, SearchResult) for r in results)
        assert all(r.layer == self.layer_name for r in results)
        assert "lighthouse" in results[0].content.lower()

    async def test_search_respects_limit_and_offset(self, filled: Memory) -> None:
        layer = self.layer_of(filled)
        one = await layer.search("the", 1)
        assert len(one) <= 1
        everything = await layer.search("lighthouse tax kitten", 10)
        second_page = await layer.search("lighthouse tax kitten", 10, offset=1)
        assert [r.source for r in second_page] == [r.source for r in everything[1:]]

    async def test_free_text_with_query_syntax_never_errors(self, filled: Memory) -> None:
        layer = self.layer_of(filled)
        for q in ['what "about" (the) kitten?', "AND OR NOT NEAR* ^lighthouse:", "'; DROP TABLE x; --", "???"]:
            assert isinstance(await layer.search(q, 5), list)

    async def test_recent_is_oldest_first_and_bounded(self, filled: Memory) -> None:
        recent = await self.layer_of(filled).recent(2)
        if not self.has_recency:  # declared: such a layer answers recent() with nothing, never an error
            assert recent == []
            return
        assert len(recent) == 2
        assert "kitten" in recent[-1].content.lower()

    async def test_results_reach_ambient_recall(self, filled: Memory) -> None:
        out = await filled.call("ambient_recall", {"context": "lighthouse keeper door"})
        status = {s["layer"]: s["status"] for s in out["layers"]}
        assert status.get(self.layer_name) == "ok"
        assert any(r["layer"] == self.layer_name and "lighthouse" in r["content"].lower() for r in out["results"])
        assert "lighthouse" in out["text"].lower()

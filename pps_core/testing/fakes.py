"""Small in-memory layers for tests of the core: scripted results, slow or failing backends."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pps_core.hookspecs import hookimpl
from pps_core.layer import Layer
from pps_core.models import LayerHealth, Pointer, SearchResult, SectionConfig
from pps_core.textsearch import lexical_scores


class ScriptedLayer(Layer):
    """A layer over a list of texts; ``delay`` makes it slow, ``fail`` makes every call raise.

    ``sections`` are its default startup sections; ``pointer`` is the call its ``left_out_call`` names.
    """

    def __init__(self, name: str, texts: Sequence[str] = (), *, delay: float = 0.0, fail: str | None = None,
                 title: str | None = None, sections: Sequence[SectionConfig] = (),
                 pointer: Pointer | None = None) -> None:
        super().__init__()
        self.sections = list(sections)
        self.pointer = pointer
        self.name = name
        self.title = title or name
        self.texts = list(texts)
        self.delay = delay
        self.fail = fail

    async def _maybe(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            raise RuntimeError(self.fail)

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        await self._maybe()
        scores = lexical_scores(query, {str(i): t for i, t in enumerate(self.texts)})
        ranked = sorted(((s, i) for i, s in enumerate(scores) if s > 0), reverse=True)[offset:offset + limit]
        return [SearchResult(layer=self.name, content=self.texts[i], source=f"{self.name}-{i}", score=s,
                             metadata={"kind": "document"}) for s, i in ranked]

    async def recent(self, limit: int) -> list[SearchResult]:
        await self._maybe()
        return [SearchResult(layer=self.name, content=t, source=f"{self.name}-{i}", metadata={"kind": "document"})
                for i, t in list(enumerate(self.texts))[-limit:]] if limit else []

    def default_sections(self) -> list[SectionConfig]:
        return list(self.sections)

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        return self.pointer

    async def health(self) -> LayerHealth:
        await self._maybe()
        return LayerHealth(layer=self.name, available=True, counts={"items": len(self.texts)})


class _LayerPlugin:
    def __init__(self, layers: list[Layer], name: str) -> None:
        self.layers = layers
        self.__pps_name__ = name

    @hookimpl
    def pps_layers(self, memory: Any) -> list[Layer]:
        return list(self.layers)


def layer_plugin(*layers: Layer, name: str = "scripted") -> _LayerPlugin:
    """A plugin object providing the given layers (register with ``extra_plugins=[...]``)."""
    return _LayerPlugin(list(layers), name)


def broken_layer_plugin(name: str, error: str) -> _LayerPlugin:
    """A plugin whose layer fails to open (its backend is down)."""

    class Broken(ScriptedLayer):
        async def open(self) -> None:
            raise ConnectionError(error)

    return layer_plugin(Broken(name), name=f"broken-{name}")

"""The graph page starts at the graph's focal entity, which the explorer learns from whatever graph layer the entity
loads through pps_core's :class:`~pps_core.contracts.FocalGraph` contract (issue 38: it read the graph plugin's
settings module, a plugin it only names in an extra)."""

from __future__ import annotations

from pps_explorer.tend import _focal

from pps_core import hookimpl
from pps_core.contracts import FocalGraph
from pps_core.layer import Layer
from pps_core.models import LayerHealth


class StarLayer(Layer):
    """A third-party graph layer: not graphiti, it only fills the contract."""

    name = "stars"

    def __init__(self, focal: str) -> None:
        super().__init__()
        self.focal_name = focal

    async def search(self, query, limit, offset=0):
        return []

    async def health(self):
        return LayerHealth(layer=self.name, available=True)


class StarPlugin:
    __pps_name__ = "stars"

    @hookimpl
    def pps_layers(self, memory):
        return [StarLayer("Vega")]


async def test_the_focal_entity_comes_from_any_graph_layer_filling_the_contract(make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[StarPlugin()])
    assert isinstance(memory.layer("stars"), FocalGraph)
    assert _focal(memory) == "Vega"


async def test_the_graph_plugins_setting_and_the_entity_name_otherwise(make_memory):
    graph = await make_memory("lyra", plugins=["sqlite", "embeddings", "graphiti"], graphiti={"focal_entity": "Ana"})
    assert _focal(graph) == "Ana"
    plain = await make_memory("orion", plugins=["sqlite"])
    assert _focal(plain) == "orion"

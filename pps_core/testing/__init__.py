"""Test support for PPS and its plugins: fixtures (a pytest plugin) and the layer contract suite.

    from pps_core.testing import LayerContract

    class TestMyLayerContract(LayerContract):
        plugins = ["mylayer"]
        layer_name = "my_layer"

        async def add_items(self, memory, texts):
            for t in texts:
                await memory.call("my_save", {"content": t})
"""

from .contract import LayerContract
from .fakes import ScriptedLayer, broken_layer_plugin, layer_plugin

__all__ = ["LayerContract", "ScriptedLayer", "broken_layer_plugin", "layer_plugin"]

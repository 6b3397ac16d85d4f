"""Test support for PPS and its plugins: fixtures (a pytest plugin), the layer and transport contract suites.

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
from .transport import ContractClient, ServedEntity, TransportContract, error_from

__all__ = ["ContractClient", "LayerContract", "ScriptedLayer", "ServedEntity", "TransportContract", "broken_layer_plugin",
           "error_from", "layer_plugin"]

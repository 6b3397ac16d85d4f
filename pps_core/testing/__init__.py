"""Test support for PPS and its plugins: fixtures (a pytest plugin), the layer and transport contract suites.

    from pps_core.testing import LayerContract

    class TestMyLayerContract(LayerContract):
        plugins = ["mylayer"]
        layer_name = "my_layer"

        async def add_items(self, memory, texts):
            for t in texts:
                await memory.call("my_save", {"content": t})

The names below are imported on first use (PEP 562): ``pps_core.testing.ledger``, the store the transport
suite serves, loads without pytest (its ``pps serve`` processes have none). It is registered only for the
suites' own processes (``pps_core.testing.server.pps_env``), never in a user's install.
"""

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "LayerContract": "contract",
    "ScriptedLayer": "fakes", "broken_layer_plugin": "fakes", "layer_plugin": "fakes",
    "ContractClient": "transport", "ServedEntity": "transport", "TransportContract": "transport",
    "error_from": "transport",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pps_core.testing' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from .contract import LayerContract
    from .fakes import ScriptedLayer, broken_layer_plugin, layer_plugin
    from .transport import ContractClient, ServedEntity, TransportContract, error_from

__all__ = ["ContractClient", "LayerContract", "ScriptedLayer", "ServedEntity", "TransportContract", "broken_layer_plugin",
           "error_from", "layer_plugin"]

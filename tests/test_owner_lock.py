"""One process owns an entity whose stores are files; stores that are servers are shared without a lock."""

import pytest

from pps_core import Memory
from pps_core.errors import OwnershipError
from pps_core.settings import load_settings
from pps_core.testing import ScriptedLayer, layer_plugin


def shared(name):
    layer = ScriptedLayer(name, ["on a server"])
    layer.exclusive = False
    return layer


async def test_an_entity_of_server_stores_opens_in_two_processes_at_once(pps_home):
    settings = load_settings("srv", pps_home, plugins=[])
    first = await Memory(settings, extra_plugins=[layer_plugin(shared("a"))]).open()
    second = await Memory(settings, extra_plugins=[layer_plugin(shared("a"))]).open()
    try:
        assert not first.lock.held and not second.lock.held
        assert (await second.call("pps_health", {}))["ok"]
    finally:
        await second.close()
        await first.close()


async def test_one_exclusive_layer_makes_the_entity_owned_by_one_process(pps_home):
    settings = load_settings("own", pps_home, plugins=[])
    first = await Memory(settings, extra_plugins=[layer_plugin(shared("a"), ScriptedLayer("file"))]).open()
    try:
        assert first.lock.held
        with pytest.raises(OwnershipError, match="owned by another process"):
            await Memory(settings, extra_plugins=[layer_plugin(shared("a"), ScriptedLayer("file"))]).open()
    finally:
        await first.close()

"""The in-memory store passes the turn store contract; the turn-operation suite runs it too
(``PPS_TEST_BACKENDS`` includes ``memstore`` by default in plugins/turns/tests)."""

import pytest
from pps_memstore import MemStore
from pps_turns.testing import TurnStoreContract


class TestMemStoreContract(TurnStoreContract):
    async def open_store(self, tmp_path, request):
        return MemStore(str(tmp_path))


@pytest.mark.asyncio
async def test_an_entity_listing_memstore_has_the_turn_layers_and_operations(make_memory):
    m = await make_memory(plugins=["memstore"])
    assert {"raw_capture", "message_summaries"} <= set(m.layers)
    ack = await m.call("store_message", {"content": "the kettle is fixed", "author_name": "Ada", "channel": "c"})
    found = await m.call("raw_search", {"query": "kettle"})
    assert found["results"][0]["id"] == ack["id"]

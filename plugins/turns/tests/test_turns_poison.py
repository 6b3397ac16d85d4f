"""One bad row never takes reads down (issue 14 items 1, 2): poison is refused before anything is written, and
rows an older version (or another writer) stored are rendered as far as they can be, never a 500."""


import pytest

from pps_core import InvalidParams

READS = [("ambient_recall", {"context": "startup"}), ("ambient_recall", {"context": "lighthouse"}),
         ("ambient_recall", {"context": "startup", "budget": 2000}), ("raw_search", {"query": "lighthouse"}),
         ("summarize_messages", {}), ("get_turns_since_summary", {}), ("get_conversation_context", {"turns": 20}),
         ("get_turns_since", {"timestamp": "2000-01-01"}), ("get_turns_around", {"timestamp": "2026-01-01"}),
         ("summary_stats", {}), ("pps_health", {}),
         ("poll_channels", {"consumer_key": "k", "channel": "other"})]


def nested(depth):
    root = cur = {}
    for _ in range(depth - 1):
        cur["k"] = {}
        cur = cur["k"]
    return root


async def read_everything(memory):
    for name, params in READS:
        await memory.call(name, params)  # raises on a 500-class failure


@pytest.mark.parametrize("poison", [
    {"metadata": nested(300)}, {"metadata": nested(480)}, {"metadata": nested(5000)},
    {"created_at": "9999-12-31T23:59:59Z"}, {"created_at": "0001-01-01T00:00:00Z"},
])
async def test_poison_is_refused_and_nothing_is_written(make_memory, poison):
    memory = await make_memory(plugins=["sqlite"], timezone="Europe/Paris")
    await memory.call("store_message", {"content": "the lighthouse keeper", "author_name": "J", "channel": "c"})
    turn = {"content": "poison", "author_name": "X", "channel": "c", **poison}
    with pytest.raises(InvalidParams):
        await memory.call("store_message", turn)
    with pytest.raises(InvalidParams):
        await memory.call("store_messages", {"messages": [turn]})
    assert (await memory.call("summary_stats", {}))["total_messages"] == 1
    await read_everything(memory)



"""Lifecycle and event hooks reach plugins; a failing listener never breaks the call."""

from pps_core import hookimpl


class Recorder:
    def __init__(self):
        self.events = []

    @hookimpl
    def pps_memory_opened(self, memory):
        self.events.append(("opened", sorted(memory.layers)))

    @hookimpl
    def pps_memory_closing(self, memory):
        self.events.append(("closing", memory.settings.entity))

    @hookimpl
    def pps_operation_called(self, memory, name, params, ok, ms):
        self.events.append(("called", name, ok, ms >= 0))


class Exploding:
    @hookimpl
    def pps_message_stored(self, memory, message):
        raise RuntimeError("listener bug")


async def test_lifecycle_and_operation_events(make_memory):
    rec = Recorder()
    m = await make_memory(plugins=["sqlite"], extra_plugins=[rec])
    assert rec.events == [("opened", ["message_summaries", "raw_capture"])]
    await m.call("summary_stats")
    try:
        await m.call("get_turns_around", {"timestamp": "nonsense"})
    except Exception:
        pass
    assert ("called", "summary_stats", True, True) in rec.events
    assert ("called", "get_turns_around", False, True) in rec.events
    await m.close()
    assert rec.events[-1] == ("closing", "testentity")


async def test_a_failing_listener_does_not_lose_the_turn(make_memory):
    m = await make_memory(plugins=["sqlite"], extra_plugins=[Exploding()])
    ack = await m.call("store_message", {"content": "kept", "author_name": "A", "channel": "c"})
    assert (await m.call("raw_search", {"query": "kept"}))["results"][0]["id"] == ack["id"]

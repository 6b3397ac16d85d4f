"""The turn stores fire the kernel's events: a failing listener never loses the turn, and their operations
reach pps_operation_called with ok=False when they refuse (moved from tests/test_events.py; the kernel's
event behaviour itself is tested on fakes in tests/test_hook_calls.py)."""

from pps_core import hookimpl


class Recorder:
    def __init__(self):
        self.events = []

    @hookimpl
    def pps_memory_opened(self, memory):
        self.events.append(("opened", sorted(memory.layers)))

    @hookimpl
    def pps_operation_called(self, memory, name, params, ok, ms):
        self.events.append(("called", name, ok))

    @hookimpl
    def pps_message_stored(self, memory, message):
        self.events.append(("stored", message.content))

    @hookimpl
    def pps_turn_copies(self, memory):
        return []  # an observer declares what it keeps: nothing


class Exploding:
    @hookimpl
    def pps_message_stored(self, memory, message):
        raise RuntimeError("listener bug")

    @hookimpl
    def pps_turn_copies(self, memory):
        return []


async def test_store_operations_fire_the_kernel_events(make_memory):
    rec = Recorder()
    m = await make_memory(plugins=["sqlite"], extra_plugins=[rec])
    assert rec.events == [("opened", ["message_summaries", "raw_capture"])]
    await m.call("store_message", {"content": "hello", "author_name": "A", "channel": "c"})
    await m.call("summary_stats")
    try:
        await m.call("get_turns_around", {"timestamp": "nonsense"})
    except Exception:
        pass
    assert ("stored", "hello") in rec.events
    assert ("called", "summary_stats", True) in rec.events
    assert ("called", "get_turns_around", False) in rec.events


async def test_a_failing_listener_does_not_lose_the_turn(make_memory):
    rec = Recorder()
    m = await make_memory(plugins=["sqlite"], extra_plugins=[rec, Exploding()])  # pluggy calls the last first
    ack = await m.call("store_message", {"content": "kept", "author_name": "A", "channel": "c"})
    assert (await m.call("raw_search", {"query": "kept"}))["results"][0]["id"] == ack["id"]
    assert ("stored", "kept") in rec.events  # the other listener still heard it

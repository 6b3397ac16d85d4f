"""The catalog checks every operation's parameters before a handler runs: unknown keys, nesting, time range."""

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel

from pps_core import InvalidParams, Operation, hookimpl
from pps_core.catalog import MAX_DEPTH
from pps_core.timeutil import local, parse_timestamp

calls = []


class Loose(BaseModel):  # a plugin that forgot extra="forbid"
    tag: str | None = None
    metadata: dict | None = None


async def remember(memory, p):
    calls.append(p)
    return {"ok": True}


class LoosePlugin:
    __pps_name__ = "loose"

    @hookimpl
    def pps_operations(self, memory):
        return [Operation("loose_save", Loose, remember, "saves")]


def nested(depth):
    root = cur = {}
    for _ in range(depth - 1):
        cur["k"] = {}
        cur = cur["k"]
    return root


async def test_a_misspelled_parameter_is_refused_for_every_plugin(make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[LoosePlugin()])
    calls.clear()
    with pytest.raises(InvalidParams, match="tags"):
        await memory.call("loose_save", {"tags": "x"})
    assert calls == []
    assert memory.operation("loose_save").input_schema()["additionalProperties"] is False


async def test_deep_nesting_is_refused_before_the_handler_runs(make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[LoosePlugin()])
    calls.clear()
    await memory.call("loose_save", {"metadata": nested(MAX_DEPTH - 1)})
    assert len(calls) == 1
    for depth in (MAX_DEPTH + 1, 300, 5000):
        with pytest.raises(InvalidParams, match="nest deeper"):
            await memory.call("loose_save", {"metadata": nested(depth)})
    assert len(calls) == 1


@pytest.mark.parametrize("value,zone", [("9999-12-31T23:59:59Z", "Europe/Paris"),
                                        ("0001-01-01T00:00:00Z", "America/Chicago"),
                                        ("9999-12-31T23:59:59", "Pacific/Kiritimati")])
def test_timestamps_every_zone_cannot_render_are_refused(value, zone):
    with pytest.raises(InvalidParams, match="out of range"):
        parse_timestamp(value, ZoneInfo(zone), "created_at")


def test_a_stored_time_at_the_edge_still_renders():
    edge = datetime.fromisoformat("9999-12-31T23:59:59+00:00")
    assert local(edge, ZoneInfo("Europe/Paris")).year == 9999  # read back in UTC rather than failing

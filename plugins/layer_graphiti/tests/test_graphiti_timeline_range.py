"""texture_timeline with a duration reaching past the calendar is a clear error naming the parameter."""

from __future__ import annotations

import pytest

from pps_core.errors import InvalidParams


@pytest.mark.parametrize("param, value", [("since", "99999999d"), ("since", "9999999999d"),
                                          ("until", "999999999999w")])
async def test_a_duration_past_the_calendar_names_the_parameter(graph_memory, param, value):
    memory = await graph_memory()
    params = {"since": "1900-01-02"} if param == "until" else {}
    with pytest.raises(InvalidParams) as caught:
        await memory.call("texture_timeline", {**params, param: value})
    assert caught.value.param == param and value in caught.value.message

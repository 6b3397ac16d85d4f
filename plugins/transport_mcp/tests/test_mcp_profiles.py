"""Tool profiles: `[mcp] tools` decides what an MCP client lists; instructions follow who brings startup."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from pps_mcp.profiles import ESSENTIAL, concise
from pps_mcp.server import create_server

from pps_core.errors import ConfigError

PLUGINS = ["sqlite", "crystals"]


def size(tools) -> int:
    return len(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]))


async def test_the_essential_profile_lists_fewer_tools_with_concise_descriptions(make_memory):
    memory = await make_memory(plugins=PLUGINS, mcp={"tools": "essential"})
    async with Client(create_server(memory)) as client:
        tools = (await client.list_tools()).tools
        # a tool outside the profile is still callable by name (startup pointers may name one)
        stored = await client.call_tool("store_message", {"content": "x", "author_name": "A", "channel": "c"})
    async with Client(create_server(memory, tools="all")) as client:
        every = (await client.list_tools()).tools
    names = [t.name for t in tools]
    assert names == [op.name for op in memory.catalog if op.name in ESSENTIAL]
    assert "store_message" not in names and "ambient_recall" in names and not stored.is_error
    recall = next(t for t in tools if t.name == "ambient_recall")
    assert recall.description == concise(memory.catalog.get("ambient_recall").description)
    assert recall.description.count(". ") == 0 and recall.input_schema == memory.catalog.get(
        "ambient_recall").input_schema()
    assert size(tools) < size(every) / 2


async def test_a_list_profile_and_a_bad_name(make_memory):
    memory = await make_memory(plugins=PLUGINS, mcp={"tools": ["raw_search", "crystallize"]})
    async with Client(create_server(memory)) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["crystallize", "raw_search"]
    with pytest.raises(ConfigError, match="no_such_tool"):
        create_server(memory, tools="raw_search,no_such_tool")


async def test_instructions_do_not_ask_for_startup_when_hooks_inject_it(make_memory):
    memory = await make_memory(plugins=PLUGINS)
    async with Client(create_server(memory)) as client:
        default = client.instructions
    async with Client(create_server(memory, startup="hooks")) as client:
        hooks = client.instructions
    assert "ambient_recall(context='startup')" in default
    assert "startup" in hooks and "ambient_recall(context='startup')" not in hooks and "already" in hooks

"""Tool profiles: `[mcp] tools` decides what an MCP client lists; instructions follow who brings startup."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from pps_mcp.profiles import concise, untitled
from pps_mcp.server import create_server

from pps_core import NoParams, Operation, hookimpl
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
    assert names == [op.name for op in memory.catalog if op.essential]
    assert "store_message" not in names and "ambient_recall" in names and not stored.is_error
    recall = next(t for t in tools if t.name == "ambient_recall")
    assert recall.description == concise(memory.catalog.get("ambient_recall").description)
    full = memory.catalog.get("ambient_recall").input_schema()
    assert recall.description.count(". ") == 0 and recall.input_schema == untitled(full)
    assert '"title"' in json.dumps(full) and '"title"' not in json.dumps(recall.input_schema)
    assert recall.input_schema["properties"]["context"]["maxLength"] == full["properties"]["context"]["maxLength"]
    assert size(tools) < size(every) / 2


async def test_the_default_tool_list_is_the_essential_profile_under_8100_characters(make_memory):
    """Issue 15's budget for what `pps setup claude-code` registers, and issue 40's: the default of every
    registration (`pps serve mcp` as README's examples run it) is that profile, with every default plugin loaded;
    the parameters keep their types, limits, defaults and descriptions (only ``title`` annotations go)."""
    from pps_core.plugins import default_plugins

    memory = await make_memory(plugins=default_plugins())  # no [mcp] tools: the default
    async with Client(create_server(memory)) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == [op.name for op in memory.catalog if op.essential]
    assert "raw_search" in [t.name for t in tools]
    assert size(tools) < 8_100, size(tools)  # the bound for the default list is 10,000
    search = next(t for t in tools if t.name == "raw_search")
    query = search.input_schema["properties"]["query"]
    assert query["type"] == "string" and query["maxLength"] == 10_000 and query["description"]
    assert search.input_schema["required"] == ["query"]
    assert search.input_schema == untitled(memory.catalog.get("raw_search").input_schema())
    assert '"title"' not in json.dumps(search.input_schema)
    # only the hints the MCP specification does not already imply: what a client concludes is unchanged
    assert search.annotations.read_only_hint is True and search.annotations.open_world_hint is False
    save = next(t for t in tools if t.name == "anchor_save")
    assert save.annotations.read_only_hint in (None, False) and save.annotations.destructive_hint is False


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


class _Plugin:
    """A third party's plugin: one operation marked essential, one not."""

    __pps_name__ = "thirdparty"

    @hookimpl
    def pps_operations(self, memory):
        async def ping(_memory, _params):
            return {"pong": True}

        return [Operation("tp_ping", NoParams, ping, "Ping. More words.", read_only=True, essential=True),
                Operation("tp_other", NoParams, ping, "Other.", read_only=True)]


async def test_essential_is_what_plugins_mark_not_a_list_of_names_in_mcp(make_memory):
    """The profile reads ``Operation.essential``: a third party's operation joins it by setting the flag, and the
    turn search (raw_search) is in it."""
    memory = await make_memory(plugins=PLUGINS, extra_plugins=[_Plugin()], mcp={"tools": "essential"})
    async with Client(create_server(memory)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
    assert "tp_ping" in names and "tp_other" not in names
    assert "raw_search" in names
    assert {"ambient_recall", "crystallize", "get_crystals", "get_turns_since_summary", "get_recent_summaries",
            "get_turns_around"} <= set(names)


def test_untitled_drops_title_annotations_and_keeps_a_parameter_named_title():
    schema = {"title": "AnchorSave", "type": "object", "required": ["title"],
              "properties": {"title": {"title": "Title", "type": "string", "maxLength": 200},
                             "tags": {"title": "Tags", "type": "array", "items": {"title": "Tag", "type": "string"}}},
              "$defs": {"Where": {"title": "Where", "enum": ["a", "b"]}}}
    assert untitled(schema) == {"type": "object", "required": ["title"],
                                "properties": {"title": {"type": "string", "maxLength": 200},
                                               "tags": {"type": "array", "items": {"type": "string"}}},
                                "$defs": {"Where": {"enum": ["a", "b"]}}}

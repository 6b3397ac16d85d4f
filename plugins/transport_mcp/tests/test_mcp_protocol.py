"""Protocol truth over MCP (issue 13): an unknown tool is a JSON-RPC error, not a tool result; every plugin's tools
refuse misspelled parameters (the catalog forbids unknown keys); hints say what the tools do."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from pps_mcp.server import create_server


async def test_an_unknown_tool_is_a_protocol_error(make_memory):
    memory = await make_memory(plugins=["sqlite"])
    async with Client(create_server(memory)) as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("store_mesage", {"content": "x"})
        assert err.value.code == -32602 and "store_mesage" in err.value.message
        ok = await client.call_tool("summary_stats", {})  # the session goes on
        assert not ok.is_error


async def test_chroma_and_graphiti_tools_refuse_misspelled_parameters(make_memory):
    memory = await make_memory(plugins=["sqlite", "embeddings", "chroma", "graphiti"])
    calls = {"anchor_save": {"content": "the first snow", "tag": "x"},
             "anchor_search": {"query": "snow", "limt": 3},
             "texture_search": {"query": "who", "limt": 3},
             "texture_add_triplet": {"source": "A", "relationship": "knows", "target": "B", "fakt": "x"}}
    async with Client(create_server(memory)) as client:
        for name, args in calls.items():
            answer = await client.call_tool(name, args)
            assert answer.is_error, name
            bad = next(k for k in args if k in ("tag", "limt", "fakt"))
            assert answer.structured_content["error"] == "invalid_params" and bad in answer.content[0].text, name
    assert (await memory.call("anchor_list", {}))["total"] == 0  # nothing was written


async def test_capture_is_not_advertised_as_idempotent(make_memory):
    memory = await make_memory(plugins=["sqlite"])
    async with Client(create_server(memory, tools="all")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["store_message"].annotations.idempotent_hint is False
    assert tools["store_messages"].annotations.idempotent_hint is False
    assert tools["forget_turns"].annotations.destructive_hint is True
    assert tools["forget_search"].annotations.destructive_hint is True

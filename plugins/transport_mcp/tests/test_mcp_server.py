"""The MCP server generated from the catalog: in-process with the SDK's Client, and `pps serve mcp` over stdio."""

from __future__ import annotations

import os
import subprocess
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from pps_mcp.server import create_server

from pps_core.testing.server import init_entity, pps_env

PLUGINS = ["sqlite", "crystals"]


async def test_tools_are_the_catalog(make_memory):
    memory = await make_memory(plugins=PLUGINS)
    async with Client(create_server(memory, tools="all")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert list(tools) == memory.catalog.names()
    for op in memory.catalog:
        tool = tools[op.name]
        assert tool.description == op.description
        assert tool.input_schema == op.input_schema()
        assert tool.annotations.read_only_hint is op.read_only
        assert tool.annotations.destructive_hint is op.destructive
        assert tool.annotations.idempotent_hint is op.idempotent
    assert {"ambient_recall", "raw_search", "store_message", "crystallize", "pps_regenerate_token"} <= set(tools)


async def test_ambient_recall_is_markdown_plus_structured(make_memory):
    memory = await make_memory(plugins=PLUGINS)
    async with Client(create_server(memory)) as client:
        stored = await client.call_tool("store_message", {"content": "the lighthouse door is blue",
                                                          "author_name": "Jeff", "channel": "terminal"})
        assert not stored.is_error, stored.content
        result = await client.call_tool("ambient_recall", {"context": "startup"})
    assert not result.is_error
    direct = await memory.call("ambient_recall", {"context": "startup"})
    assert result.content[0].text == direct["text"]
    assert "the lighthouse door is blue" in result.content[0].text
    assert set(result.structured_content) == set(direct) - {"text"}  # the markdown once, the data beside it


async def test_bad_params_are_error_results_naming_the_parameter(make_memory):
    memory = await make_memory(plugins=PLUGINS)
    async with Client(create_server(memory)) as client:
        bad = await client.call_tool("raw_search", {"query": "door", "limit": -1})
        missing = await client.call_tool("crystallize", {})
        listing = await client.call_tool("crystal_list", {})
    assert bad.is_error and bad.structured_content["param"] == "limit"
    assert "limit" in bad.content[0].text
    assert missing.is_error and missing.structured_content == {
        "error": "invalid_params", "message": missing.structured_content["message"], "param": "content"}
    for result in (bad, missing):  # (an unknown tool is a protocol error: test_mcp_protocol.py)
        assert "Traceback" not in result.content[0].text
    assert listing.structured_content["current"] == []  # nothing was half-written


def _init(root, entity: str, plugins: str = "sqlite,crystals,mcp") -> None:
    init_entity(root, entity, plugins)


async def test_stdio_subprocess_owns_the_stores(tmp_path):
    _init(tmp_path, "lyra")
    params = StdioServerParameters(command=sys.executable, env=pps_env(tmp_path),
                                   args=["-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra"])
    with open(tmp_path / "stderr.log", "w") as errlog:
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(params, errlog=errlog)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            saved = await client.call_tool("crystallize", {"content": "first crystal"})
            recall = await client.call_tool("ambient_recall", {"context": "startup"})
            bad = await client.call_tool("get_crystals", {"count": "many"})
    assert "crystallize" in names and "raw_search" in names
    assert not saved.is_error and saved.structured_content["created"] == "crystal_001.md"
    assert "first crystal" in recall.content[0].text
    assert bad.is_error and bad.structured_content["param"] == "count"
    assert (tmp_path / "lyra" / "crystals" / "crystal_001.md").exists()


def test_second_owner_is_refused_naming_the_owner(tmp_path):
    """A stdio server cannot open stores another process owns; it says who owns them."""
    import asyncio

    from pps_core import Memory

    _init(tmp_path, "lyra")

    async def hold_and_try():
        async with Memory.for_entity("lyra", home=tmp_path / "lyra"):
            return await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra"],
                env=pps_env(tmp_path), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)

    proc = asyncio.run(hold_and_try())
    assert proc.returncode == 2
    assert f"pid {os.getpid()}" in proc.stderr and "owned by another process" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_stdout_carries_only_protocol_frames(tmp_path):
    """Raw JSON-RPC over the pipe: every stdout line is a frame; logs and errors stay on stderr."""
    import json

    _init(tmp_path, "lyra")
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "raw_search", "arguments": {"limit": 5}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "crystallize",
                                                                         "arguments": {"content": "piped"}}},
    ]
    import threading

    proc = subprocess.Popen([sys.executable, "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra",
                             "--log-level", "DEBUG"], env=pps_env(tmp_path), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    guard = threading.Timer(60, proc.kill)
    guard.start()
    proc.stdin.write("".join(json.dumps(f) + "\n" for f in frames))
    proc.stdin.flush()
    lines = []
    while len([m for m in lines if "id" in m]) < 4:  # stdin stays open until every answer is in
        line = proc.stdout.readline()
        assert line, "server closed stdout early"
        lines.append(json.loads(line))
    proc.stdin.close()
    rest, stderr = proc.stdout.read(), proc.stderr.read()
    proc.wait()
    guard.cancel()
    lines += [json.loads(line) for line in rest.splitlines()]
    assert all(msg.get("jsonrpc") == "2.0" for msg in lines)
    answers = {msg["id"]: msg for msg in lines if "id" in msg}
    assert set(answers) == {1, 2, 3, 4}
    assert answers[3]["result"]["isError"] is True
    assert answers[3]["result"]["structuredContent"]["param"] == "query"
    assert answers[4]["result"]["structuredContent"]["created"] == "crystal_001.md"
    assert "Traceback" not in stderr and proc.returncode == 0


def test_stdin_closed_right_after_the_requests_still_gets_every_answer(tmp_path):
    """`pps serve mcp <<EOF ... EOF`: stdin ends before the answers; every request read is still answered."""
    import json

    _init(tmp_path, "lyra")
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "heredoc", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "crystallize",
                                                                         "arguments": {"content": "heredoc"}}},
    ]
    out = subprocess.run([sys.executable, "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra"],
                         env=pps_env(tmp_path), text=True, capture_output=True, timeout=60,
                         input="".join(json.dumps(f) + "\n" for f in frames))
    answers = {m["id"]: m for m in map(json.loads, out.stdout.splitlines()) if "id" in m}
    assert set(answers) == {1, 2, 3}, out.stderr
    assert answers[3]["result"]["structuredContent"]["created"] == "crystal_001.md"
    assert out.returncode == 0 and "Traceback" not in out.stderr

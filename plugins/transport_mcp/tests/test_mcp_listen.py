"""A stdio MCP server that owns the stores answers other processes on the kernel's local channel (no HTTP
plugin needed), so Claude Code's capture hooks, `pps call` or a bot share the entity instead of hitting the
owner lock."""

import asyncio
import json
import subprocess
import sys

from mcp.client.stdio import stdio_client

from pps_core.owner import read_owner
from pps_core.testing.server import init_entity, pps_env


def _init(root, plugins):
    init_entity(root, "lyra", plugins)


async def test_other_processes_reach_a_stdio_owner(tmp_path):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    _init(tmp_path, "sqlite,crystals,mcp")
    params = StdioServerParameters(command=sys.executable, env=pps_env(tmp_path),
                                   args=["-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra"])
    with open(tmp_path / "stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await client.call_tool("store_message", {"content": "said in the terminal", "author_name": "Jeff",
                                                     "channel": "terminal:1"})
            owner = read_owner(tmp_path / "lyra")
            assert owner and owner["channel"] and not owner.get("address")
            other = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "pps_core.cli", "call", "--entity", "lyra", "store_message",
                                 json.dumps({"content": "said on discord", "author_name": "Brandi",
                                             "channel": "discord:home"})],
                env=pps_env(tmp_path), capture_output=True, text=True, timeout=60)
            assert other.returncode == 0, other.stderr
            recall = await client.call_tool("ambient_recall", {"context": "startup"})
    text = recall.content[0].text
    assert "Jeff: said in the terminal" in text and "Brandi: said on discord" in text
    assert read_owner(tmp_path / "lyra") is None  # released at exit


def test_listener_keeps_stdout_clean(tmp_path):
    _init(tmp_path, "sqlite,mcp")
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "summary_stats", "arguments": {}}},
    ]
    proc = subprocess.run([sys.executable, "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra",
                           "--log-level", "DEBUG"], env=pps_env(tmp_path), text=True, capture_output=True,
                          input="".join(json.dumps(f) + "\n" for f in frames), timeout=60)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines and all(m.get("jsonrpc") == "2.0" for m in lines)
    assert "Traceback" not in proc.stderr

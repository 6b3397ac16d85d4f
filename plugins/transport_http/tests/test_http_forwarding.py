"""`pps call` and `pps serve mcp` forward to the entity's running server; no server = they own the stores."""

from __future__ import annotations

import json
import sys

import httpx
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from pps_core.errors import InvalidParams, UnknownOperation
from pps_core.forward import try_forward
from pps_core.settings import load_settings


def test_cli_call_forwards_to_the_server(server, pps_cli):
    pps = pps_cli
    saved = pps(server.root, "call", "--entity", "lyra", "crystallize", '{"content": "via the CLI"}')
    created = json.loads(saved.stdout)["created"]
    assert created in server.call("crystal_list").json()["current"]
    bad = pps(server.root, "call", "--entity", "lyra", "crystallize", "{}", check=False)
    assert bad.returncode == 2 and "content" in bad.stderr and "Traceback" not in bad.stderr
    local = pps(server.root, "call", "--entity", "lyra", "--local", "crystal_list", check=False)
    assert local.returncode == 2 and "owned by another process" in local.stderr


def test_try_forward_raises_the_servers_errors(server, monkeypatch):
    monkeypatch.setenv("PPS_ROOT", str(server.root))
    settings = load_settings("lyra")
    assert "crystal_001.md" in json.dumps(try_forward(settings, "crystal_list", {}))
    try:
        try_forward(settings, "get_crystals", {"count": -1})
    except InvalidParams as exc:
        assert exc.param == "count" and exc.status == 422
    else:  # pragma: no cover
        raise AssertionError("expected InvalidParams")
    try:
        try_forward(settings, "no_such_operation", {})
    except UnknownOperation:
        pass
    else:  # pragma: no cover
        raise AssertionError("expected UnknownOperation")


def test_try_forward_is_none_without_a_server(tmp_path, monkeypatch):
    monkeypatch.setenv("PPS_ROOT", str(tmp_path))
    assert try_forward(load_settings("nobody"), "crystal_list", {}) is None


async def test_stdio_mcp_forwards_to_the_running_server(server, pps_cli):
    params = StdioServerParameters(command=sys.executable, env=pps_cli.env(server.root),
                                   args=["-m", "pps_core.cli", "serve", "mcp", "--entity", "nexus"])
    with open(server.root / "stdio.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            saved = await client.call_tool("crystallize", {"content": "from a terminal session"})
            bad = await client.call_tool("crystallize", {"content": ""})
    assert tools == {s["name"] for s in httpx.get(f"{server.url}/entities/nexus/tools",
                                                  headers=server.auth("nexus")).json()["tools"]}
    assert not saved.is_error, saved.content
    assert bad.is_error and bad.structured_content["param"] == "content"
    seen = server.call("get_crystals", {"count": 10}, entity="nexus", token_of="nexus").json()
    assert "from a terminal session" in json.dumps(seen)


def test_non_loopback_bind_without_a_token_refuses_to_start(tmp_path, pps_cli):
    pps = pps_cli
    pps(tmp_path, "init", "--entity", "bare", "--plugins", "crystals,http")
    (tmp_path / "bare" / "token").unlink()
    proc = pps(tmp_path, "serve", "http", "--entity", "bare", "--host", "0.0.0.0", "--port", "0", check=False)
    assert proc.returncode == 2 and "refusing to listen on 0.0.0.0" in proc.stderr


def test_a_second_server_for_the_same_entity_is_refused(server, pps_cli):
    proc = pps_cli(server.root, "serve", "http", "--entity", "lyra", "--entities", "lyra,nexus", "--port", "0",
                   check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"pid {server.proc.pid}" in proc.stderr and f"{server.url}/entities/lyra" in proc.stderr


def test_a_broken_entity_config_stops_the_server_before_it_starts(tmp_path, pps_cli):
    pps = pps_cli
    pps(tmp_path, "init", "--entity", "good", "--plugins", "crystals,http")
    pps(tmp_path, "init", "--entity", "typo", "--plugins", "crystals", check=False)
    (tmp_path / "typo" / "pps.toml").write_text('entity = "typo"\nplugins = ["crystals", "chorma"]\n')
    proc = pps(tmp_path, "serve", "http", "--entity", "good", "--entities", "good,typo", "--port", "0", check=False)
    assert proc.returncode == 2 and "no plugin named 'chorma'" in proc.stderr and "Traceback" not in proc.stderr


async def test_stdio_forwarder_says_so_when_the_server_stops(tmp_path, pps_cli, start_http):
    pps_cli(tmp_path, "init", "--entity", "solo", "--plugins", "crystals,mcp,http")
    srv = start_http(tmp_path, "--entity", "solo")
    params = StdioServerParameters(command=sys.executable, env=pps_cli.env(tmp_path),
                                   args=["-m", "pps_core.cli", "serve", "mcp", "--entity", "solo"])
    with open(tmp_path / "stdio.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            before = await client.call_tool("crystal_list", {})
            srv.stop()
            after = await client.call_tool("crystal_list", {})
    assert not before.is_error
    assert after.is_error and "has stopped" in after.content[0].text
    assert try_forward(load_settings("solo", tmp_path / "solo"), "crystal_list", {}) is None

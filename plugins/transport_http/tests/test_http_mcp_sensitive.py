"""Token rotation needs a token on every route: MCP over HTTP refuses it like REST when the entity has none."""

from __future__ import annotations

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def test_regenerate_token_without_a_token_is_refused_over_mcp_too(tmp_path, pps_cli, start_http):
    pps_cli(tmp_path, "init", "--entity", "bare", "--plugins", "crystals,mcp,http", "--timezone", "UTC")
    (tmp_path / "bare" / "token").unlink()  # an entity without a token, served on loopback
    server = start_http(tmp_path, "--entity", "bare")
    rest = httpx.post(f"{server.url}/tools/pps_regenerate_token", json={}, timeout=10)
    assert rest.status_code == 403
    async with Client(streamable_http_client(f"{server.url}/mcp",
                                             http_client=httpx2.AsyncClient(timeout=10))) as client:
        listed = await client.call_tool("crystal_list", {})
        rotated = await client.call_tool("pps_regenerate_token", {})
    assert not listed.is_error, listed.content
    assert rotated.is_error and rotated.structured_content["error"] == "forbidden", rotated.content
    assert not (tmp_path / "bare" / "token").exists()

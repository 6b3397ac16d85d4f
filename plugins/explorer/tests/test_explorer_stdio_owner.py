"""The explorer on a stdio MCP owner's loopback listener: the pages come with the entity, whoever owns it."""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

import httpx

from pps_core.owner import read_owner
from pps_core.testing.server import init_entity, pps_env


async def test_a_stdio_owner_serves_the_pages(tmp_path):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    init_entity(tmp_path, "lyra", "sqlite,crystals,mcp,http,explorer")
    params = StdioServerParameters(command=sys.executable, env=pps_env(tmp_path),
                                   args=["-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra"])
    token = (tmp_path / "lyra" / "token").read_text().strip()
    with open(tmp_path / "stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await client.call_tool("store_message", {"content": "said over stdio <b>", "author_name": "Jeff",
                                                     "channel": "terminal:1", "created_at": "2026-03-02T10:00:00Z"})
            address = urlsplit(read_owner(tmp_path / "lyra")["address"])
            base = f"{address.scheme}://{address.netloc}/ui/lyra"
            async with httpx.AsyncClient(timeout=30) as http:
                login = await http.get(f"{base}/")
                page = await http.get(f"{base}/timeline?day=2026-03-02", headers={"Authorization": f"Bearer {token}"})
    assert login.status_code == 303 and login.headers["location"] == "/ui/lyra/login"
    assert page.status_code == 200 and "said over stdio &lt;b&gt;" in page.text

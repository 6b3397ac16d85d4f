"""The index process under `pps serve mcp` (stdio): nothing it or the fork server does reaches the MCP
session's stdout, and it ends with the server."""

import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from pps_core.testing.server import init_entity, pps_env


async def test_word_photos_over_stdio_mcp(tmp_path):
    init_entity(tmp_path, "lyra", "chroma,embeddings,mcp")
    params = StdioServerParameters(command=sys.executable, env=pps_env(tmp_path),
                                   args=["-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra"])
    with open(tmp_path / "stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            saved = await client.call_tool("anchor_save", {"title": "Harbour", "content": "Boats at dawn."})
            found = await client.call_tool("anchor_search", {"query": "boats in the morning", "limit": 1})
    assert not saved.is_error and saved.structured_content["indexed"], saved
    assert found.structured_content["results"][0]["source"] == "harbour.md"

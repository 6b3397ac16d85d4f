"""What the MCP tool list costs a context window, per tool profile, with the default plugins.

    .venv/bin/python bench/mcp_tools.py

Opens a throwaway entity with the default plugins, lists its tools through a real MCP client session
for each profile (``all`` is the baseline: every operation, full descriptions) and for the default (no
``[mcp] tools``: what `pps serve mcp` lists as README's registrations run it), and prints the number
of tools and the characters of the tools/list JSON the client receives (~4 characters a token).
Targets: the ``essential`` profile under 8,100 characters; the default under 10,000 (issue 40).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile


async def main() -> int:
    from mcp import Client
    from pps_mcp.server import create_server

    from pps_core import Memory
    from pps_core.plugins import default_plugins
    from pps_core.settings import load_settings

    with tempfile.TemporaryDirectory() as root:
        os.environ["PPS_ROOT"] = root
        plugins = default_plugins()
        settings = load_settings("bench", plugins=plugins, timezone="UTC")
        async with Memory(settings) as memory:
            rows = []
            for profile in ("all", "essential", None):
                async with Client(create_server(memory, tools=profile)) as client:
                    tools = (await client.list_tools()).tools
                dumped = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
                rows.append((profile or "default", len(tools), len(dumped)))
    base = rows[0][2]
    print(f"plugins: {', '.join(plugins)}")
    print(f"{'profile':<12}{'tools':>6}{'chars':>9}{'~tokens':>9}{'ratio':>7}   target")
    for profile, n, chars in rows:
        target = {"essential": "< 8,100 chars", "default": "< 10,000 chars"}.get(profile, "(baseline)")
        print(f"{profile:<12}{n:>6}{chars:>9,}{chars // 4:>9,}{chars / base:>7.2f}   {target}")
    return 0 if rows[1][2] < 8_100 and rows[2][2] < 10_000 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

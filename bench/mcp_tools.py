"""What the MCP tool list costs a context window, per tool profile, with the default plugins.

    .venv/bin/python bench/mcp_tools.py

Opens a throwaway entity with the default plugins, lists its tools through a real MCP client session
for each profile (``all`` is the baseline: every operation, full descriptions) and prints the number
of tools and the characters of the tools/list JSON the client receives (~4 characters a token).
Target: the ``essential`` profile (the one `pps setup claude-code` registers) under 8,000 characters.
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
            for profile in ("all", "essential"):
                async with Client(create_server(memory, tools=profile)) as client:
                    tools = (await client.list_tools()).tools
                dumped = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
                rows.append((profile, len(tools), len(dumped)))
    base = rows[0][2]
    print(f"plugins: {', '.join(plugins)}")
    print(f"{'profile':<12}{'tools':>6}{'chars':>9}{'~tokens':>9}{'ratio':>7}   target")
    for profile, n, chars in rows:
        target = "< 8,000 chars" if profile == "essential" else "(baseline)"
        print(f"{profile:<12}{n:>6}{chars:>9,}{chars // 4:>9,}{chars / base:>7.2f}   {target}")
    return 0 if rows[1][2] < 8_000 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

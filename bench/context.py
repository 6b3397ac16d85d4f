"""What reaches the model, in characters, after a bulk import (issue 40).

    .venv/bin/python bench/context.py [--turns 2000]

A throwaway entity (sqlite, crystals) stores ``--turns`` typical turns in bulk (store_messages, as an importer
does), then, through a real in-process MCP client session: the startup package as ``ambient_recall`` answers it
(its text, and the whole frame: text content plus ``structuredContent``), the ``pps://startup`` resource, the
``wake_up`` prompt, ten ``raw_search`` hits without ``explain`` (text and structured data) and the default
``tools/list``. Prints one row each; the budget they should stay within is ``[startup] budget`` where it exists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta


def turn(i: int) -> dict:
    speaker = "Jeff" if i % 2 else "Lyra"
    return {"content": f"Turn {i}: we talked about the garden beds, the cedar boards and whether the tomatoes need "
                       f"more sun this week; {speaker} thought the north bed could wait until the weekend.",
            "author_name": speaker, "channel": f"chatgpt:conv{i // 40}",
            "created_at": (datetime(2026, 1, 1, 9, tzinfo=UTC) + timedelta(minutes=37 * i)).isoformat()}


async def main_async(n: int) -> int:
    from mcp import Client
    from pps_mcp.server import create_server

    from pps_core import Memory
    from pps_core.settings import load_settings

    with tempfile.TemporaryDirectory() as root:
        os.environ["PPS_ROOT"] = root
        settings = load_settings("bench", plugins=["sqlite", "crystals"], timezone="UTC")
        async with Memory(settings) as memory:
            for k in range(0, n, 1000):
                await memory.call("store_messages", {"messages": [turn(i) for i in range(k, min(n, k + 1000))]})
            budget = getattr(settings.startup, "budget", None)
            async with Client(create_server(memory)) as client:
                recall = await client.call_tool("ambient_recall", {"context": "startup"})
                resource = (await client.read_resource("pps://startup")).contents[0].text
                prompt = (await client.get_prompt("wake_up", {})).messages[0].content.text
                hits = await client.call_tool("raw_search", {"query": "garden beds cedar", "limit": 10})
                tools = (await client.list_tools()).tools
    text = recall.content[0].text
    rows = [("ambient_recall startup: text", len(text)),
            ("ambient_recall startup: frame (text + structuredContent)",
             len(text) + len(json.dumps(recall.structured_content))),
            ("pps://startup resource", len(resource)),
            ("wake_up prompt", len(prompt)),
            ("raw_search, ten hits: text content", len(hits.content[0].text)),
            ("raw_search, ten hits: structuredContent", len(json.dumps(hits.structured_content))),
            ("default tools/list (sqlite, crystals)",
             len(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])))]
    print(f"{n} turns stored in bulk; [startup] budget: {budget if budget is not None else 'none'}")
    for name, chars in rows:
        print(f"  {name:<58} {chars:>9,} chars")
    said = "Left out: " in text
    print(f"  the package says what it left out: {'yes' if said else 'no'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=2000)
    return asyncio.run(main_async(ap.parse_args().turns))


if __name__ == "__main__":
    sys.exit(main())

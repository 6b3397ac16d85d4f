"""On a graph server the layer keeps nothing in the entity's home: novelty counts live in the graph, so no
owner lock is taken and several processes (here: two memories, two homes and one shared) serve one graph."""

from __future__ import annotations

import time

import pytest


async def test_graph_server_entity_takes_no_owner_lock_and_shares_novelty(graph_memory, falkordb_server, tmp_path):
    section = {"driver": "falkordb", "port": falkordb_server.port}
    home = tmp_path / "shared-home"
    plugins = ["embeddings", "graphiti"]
    first = await graph_memory(home=home, plugins=plugins, graphiti=section)
    second = await graph_memory(home=home, plugins=plugins, graphiti=section)  # was: owned by another process
    made = await first.call("texture_add_triplet", {"source": "Lyra", "relationship": "keeps",
                                                    "target": "a journal", "fact": "Lyra keeps a leather journal"})
    out = await second.call("texture_search", {"query": "leather journal", "node_limit": 0})
    assert [r["source"] for r in out["results"]] == [made["uuid"]]
    await second.close()  # its surfacing is written to the graph as it closes
    later = time.time() + 600
    await first.rankers["novelty"].refresh()
    assert first.rankers["novelty"].count("rich_texture", made["uuid"], now=later) == pytest.approx(1.0, abs=0.01)
    await first.call("texture_delete", {"uuid": made["uuid"]})
    await first.close()
    assert sorted(p.name for p in home.rglob("*")) == []  # no lock file, no novelty file, no graph folder

    third = await graph_memory(home=tmp_path / "another-home", plugins=plugins, graphiti=section)
    await third.rankers["novelty"].refresh()
    assert third.rankers["novelty"].count("rich_texture", made["uuid"], now=later) == 0.0  # forgotten with it

"""LadybugDB (Kuzu's maintained fork) as the embedded engine: ``[graphiti] driver = "ladybug"``.

The same layer, queries and engine process as Kuzu; what LadybugDB 0.22.0 lacks is said, not hidden: no full-text
search (its extension is downloaded at run time, and PPS reaches no network), so search is by cosine alone; and
no EXPORT of graphiti's schema, so the compaction a forget needs answers 503 (the forget is then owed).
"""

from __future__ import annotations

import pytest

pytest.importorskip("ladybug", reason="pip install 'pps-graphiti[ladybug]'")


async def test_ladybug_stores_searches_and_pages_like_kuzu(graph_memory, pps_home):
    memory = await graph_memory(graphiti={"driver": "ladybug"})
    for source, target in (("Ada", "lighthouse lamp"), ("Bo", "harbour boat")):
        await memory.call("texture_add_triplet", {"source": source, "relationship": "TENDS", "target": target,
                                                  "fact": f"{source} tends the {target} every night"})
    found = await memory.call("texture_search", {"query": "who tends the lighthouse lamp", "limit": 1})
    assert found["results"][0]["content"] == "Ada tends the lighthouse lamp every night"
    assert (await memory.call("texture_entities", {"offset": 100_000, "limit": 1000}))["count"] == 0
    assert (await memory.call("texture_facts", {"offset": 10_000_000}))["total"] == 2
    health = (await memory.call("pps_health"))["layers"]["rich_texture"]
    assert health["available"] and health["detail"].startswith("ladybug graph")
    assert (pps_home / "testentity" / "graphiti" / "graph.lbug").exists()


async def test_a_kuzu_graph_moves_to_ladybug_with_pps_graph_migrate(make_memory, tmp_path):
    import json

    from pps_core.testing.server import init_entity, pps

    root = tmp_path / "root"
    home = init_entity(root, "lyra", "sqlite,embeddings,graphiti")
    memory = await make_memory("lyra", home=home)
    for source, target in (("Ada", "lighthouse lamp"), ("Bo", "harbour boat")):
        await memory.call("texture_add_triplet", {"source": source, "relationship": "TENDS", "target": target})
    await memory.close()
    out = pps(root, "graph", "migrate", "--entity", "lyra", "--to", "ladybug", check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.split("\n\n")[0])
    assert report["problems"] == [] and report["copied"]["facts"] == 2 and report["copied"]["entities"] == 4
    assert 'path = "graphiti/graph.lbug"' in out.stdout
    moved = await make_memory("lyra", home=home, graphiti={"driver": "ladybug"})
    found = await moved.call("texture_search", {"query": "who tends the harbour boat", "limit": 1})
    assert found["results"][0]["content"] == "Bo tends harbour boat"

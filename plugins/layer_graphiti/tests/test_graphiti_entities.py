"""texture_entities: the graph's entities, the most connected first (the explorer's Graph page opens on it)."""

from __future__ import annotations


async def test_entities_most_connected_first_with_their_fact_counts(graph_memory):
    memory = await graph_memory()
    empty = await memory.call("texture_entities", {})
    assert empty == {"count": 0, "offset": 0, "total": 0, "entities": []}
    for target in ("cedar", "pine", "oak"):
        await memory.call("texture_add_triplet", {"source": "Brandi", "relationship": "KNOWS_WOOD", "target": target})
    await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "ASKED", "target": "cedar"})
    out = await memory.call("texture_entities", {"limit": 2})
    assert out["total"] == 5 and out["count"] == 2
    assert [(e["name"], e["facts"]) for e in out["entities"]] == [("Brandi", 3), ("cedar", 2)]
    rest = await memory.call("texture_entities", {"limit": 10, "offset": 2})
    assert sorted((e["name"], e["facts"]) for e in rest["entities"]) == [("Jeff", 1), ("oak", 1), ("pine", 1)]

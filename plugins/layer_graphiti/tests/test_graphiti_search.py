"""rich_texture search on the real embedded graph (Kuzu), no LLM: triplets, focal ranking, rankers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pps_core.testing.contract import LayerContract
from pps_core.timeutil import now_utc, to_storage


async def add(memory, source, rel, target, fact=None, **kw):
    return await memory.call("texture_add_triplet", {"source": source, "relationship": rel, "target": target,
                                                     "fact": fact, **kw})


async def test_triplets_without_llm_are_found_by_search(graph_memory):
    memory = await graph_memory()
    first = await add(memory, "Lyra", "loves", "Jeff", "Lyra loves Jeff and their slow mornings")
    assert first["created"] and first["relationship"] == "LOVES" and set(first["new_entities"]) == {"Lyra", "Jeff"}
    again = await add(memory, "lyra", "LOVES", "Jeff", "Lyra loves Jeff and their slow mornings")
    assert not again["created"] and again["uuid"] == first["uuid"]  # exact-name reuse, no duplicate fact
    await add(memory, "Jeff", "brews", "coffee", "Jeff brews coffee every morning", target_type="Thing")

    out = await memory.call("texture_search", {"query": "coffee in the morning"})
    edges = [r for r in out["results"] if r["metadata"]["kind"] == "edge"]
    assert edges[0]["content"] == "Jeff brews coffee every morning"
    assert edges[0]["metadata"]["subject"] == "Jeff" and edges[0]["metadata"]["object"] == "coffee"
    assert {r["metadata"]["kind"] for r in out["results"]} <= {"edge", "node"}
    health = (await memory.call("pps_health"))["layers"]["rich_texture"]
    assert health["available"] and health["counts"]["facts"] == 2 and health["counts"]["entities"] == 3


async def test_ambient_recall_injects_edges_only(graph_memory):
    memory = await graph_memory()
    await add(memory, "Lyra", "paints", "the door", "Lyra painted the lighthouse door cobalt blue")
    out = await memory.call("ambient_recall", {"context": "lighthouse door"})
    texture = [r for r in out["results"] if r["layer"] == "rich_texture"]
    assert texture and all(r["metadata"]["kind"] == "edge" for r in texture)
    assert "cobalt blue" in out["text"]
    start = await memory.call("ambient_recall", {"context": "startup"})
    assert not any(r["layer"] == "rich_texture" for r in start["results"])  # skipped at startup


async def test_fact_near_the_focal_entity_outranks_an_equally_matching_distant_one(graph_memory):
    memory = await graph_memory()
    await add(memory, "Lyra", "lives with", "Jeff")
    # Same wording, same shape; Bob is nowhere near Lyra. The distant one is written last (freshest).
    await add(memory, "Jeff", "enjoys", "sailing", "Jeff enjoys sailing on quiet weekends")
    await add(memory, "Bob", "enjoys", "rowing", "Bob enjoys rowing on quiet weekends")
    out = await memory.call("texture_search", {"query": "enjoys quiet weekends", "limit": 2})
    edges = [r for r in out["results"] if r["metadata"]["kind"] == "edge"]
    assert [e["metadata"]["subject"] for e in edges] == ["Jeff", "Bob"]
    assert edges[0]["metadata"]["focal_distance"] == 1 and edges[1]["metadata"]["focal_distance"] is None

    nodes = await memory.layer("rich_texture").search_nodes("Jeff Bob", 5)
    by_name = {n.metadata["name"]: n.metadata["focal_distance"] for n in nodes}
    assert by_name.get("Jeff") == 1 and by_name.get("Bob") is None


async def test_freshness_puts_the_recent_fact_first(graph_memory):
    memory = await graph_memory()
    old = to_storage(now_utc() - timedelta(days=28))
    await add(memory, "Lyra", "discussed", "gardens", "Lyra and Jeff discussed the garden plans", valid_at=old)
    await add(memory, "Lyra", "discussed", "rooftops", "Lyra and Jeff discussed the rooftop plans")
    out = await memory.call("texture_search", {"query": "discussed plans", "limit": 2, "node_limit": 0})
    assert [r["metadata"]["object"] for r in out["results"]] == ["rooftops", "gardens"]
    assert out["results"][1]["metadata"]["freshness"] == pytest.approx(0.25, abs=0.01)  # two half-lives


async def test_diversity_lets_another_pair_through(graph_memory):
    memory = await graph_memory()
    for i, what in enumerate(["tea", "toast", "jam"]):
        await add(memory, "Lyra", f"shares {what} with", "Jeff", f"Lyra shares breakfast {what} with Jeff ({i})")
    await add(memory, "Lyra", "shares", "Brandi", "Lyra shares breakfast stories with Brandi")
    out = await memory.call("texture_search", {"query": "Lyra shares breakfast", "limit": 2, "node_limit": 0})
    pairs = [frozenset((r["metadata"]["subject"], r["metadata"]["object"])) for r in out["results"]]
    assert len(set(pairs)) == 2  # not two facts about Lyra and Jeff while Brandi waits
    everything = await memory.call("texture_search", {"query": "Lyra shares breakfast", "limit": 4, "node_limit": 0})
    assert len(everything["results"]) == 4  # overflow backfills


async def test_configured_rankers_replace_the_default(graph_memory):
    memory = await graph_memory(rankers={"rich_texture": []})
    assert memory.layer("rich_texture").default_rankers() == []
    await add(memory, "Lyra", "reads", "poetry", "Lyra reads poetry at night")
    out = await memory.call("texture_search", {"query": "poetry at night"})
    assert "freshness" not in out["results"][0]["metadata"]


async def test_duplicate_focal_nodes_are_merged_into_the_most_connected(graph_memory):
    from graphiti_core.nodes import EntityNode

    memory = await graph_memory()
    await add(memory, "Lyra", "loves", "Jeff")
    await add(memory, "Lyra", "writes", "poems")
    layer = memory.layer("rich_texture")
    driver = layer.graph.driver
    # What an LLM ingestion can leave behind: a second node with the focal name, with its own fact.
    dup = EntityNode(name="Lyra", group_id=layer.group_id, labels=["Entity"], created_at=now_utc(), summary="")
    await dup.generate_name_embedding(layer.graph.graphiti.embedder)
    await dup.save(driver)
    from graphiti_core.edges import EntityEdge

    brandi = EntityNode(name="Brandi", group_id=layer.group_id, labels=["Entity"], created_at=now_utc(), summary="")
    await brandi.generate_name_embedding(layer.graph.graphiti.embedder)
    await brandi.save(driver)
    edge = EntityEdge(group_id=layer.group_id, source_node_uuid=dup.uuid, target_node_uuid=brandi.uuid,
                      name="TRUSTS", fact="Lyra trusts Brandi", created_at=now_utc(), valid_at=now_utc())
    await edge.generate_embedding(layer.graph.graphiti.embedder)
    await edge.save(driver)
    assert len(await layer.graph.nodes_named("Lyra")) == 2

    canonical = await layer.focal_uuid()
    rows = await layer.graph.nodes_named("Lyra")
    assert [r["uuid"] for r in rows] == [canonical] and rows[0]["degree"] == 3
    out = await memory.call("texture_search", {"query": "trusts Brandi", "limit": 1, "node_limit": 0})
    assert out["results"][0]["metadata"]["focal_distance"] == 0
    assert out["results"][0]["metadata"]["source_node_uuid"] == canonical
    assert out["results"][0]["source"] == edge.uuid  # the moved fact keeps its uuid, and exists once
    health = (await memory.call("pps_health"))["layers"]["rich_texture"]
    assert health["counts"]["facts"] == 3


async def test_explore_timeline_and_delete(graph_memory):
    memory = await graph_memory()
    week_ago = to_storage(now_utc() - timedelta(days=7))
    a = await add(memory, "Lyra", "loves", "Jeff", valid_at=week_ago)
    b = await add(memory, "Jeff", "plays", "guitar")
    await add(memory, "Nexus", "hosts", "servers")
    hood = await memory.call("texture_explore", {"entity_name": "lyra", "depth": 2})
    assert {e["name"]: e["distance"] for e in hood["entities"]} == {"Lyra": 0, "Jeff": 1, "guitar": 2}
    one_hop = await memory.call("texture_explore", {"entity_name": "Lyra", "depth": 1})
    assert [f["uuid"] for f in one_hop["facts"]] == [a["uuid"]]

    recent = await memory.call("texture_timeline", {"since": "24h"})
    assert [f["object"] for f in recent["facts"]] == ["guitar", "servers"]
    older = await memory.call("texture_timeline", {"since": "8d", "until": "6d"})
    assert [f["uuid"] for f in older["facts"]] == [a["uuid"]]

    gone = await memory.call("texture_delete", {"uuid": b["uuid"]})
    assert gone["kind"] == "fact"
    out = await memory.call("texture_search", {"query": "plays guitar", "node_limit": 0})
    assert b["uuid"] not in [r["source"] for r in out["results"]]


class TestGraphitiContract(LayerContract):
    plugins = ["sqlite", "embeddings", "graphiti"]
    layer_name = "rich_texture"
    has_recency = False

    async def add_items(self, memory, texts):
        for i, text in enumerate(texts):
            await add(memory, f"Item{i}", "says", f"Thing{i}", text)


async def test_the_entity_a_question_names_outranks_look_alikes(graph_memory):
    memory = await graph_memory()
    for i in range(25):
        await memory.call("texture_add_triplet", {"source": f"Keeper{i}", "relationship": "TENDS",
                                                        "target": f"lamp {i}",
                                                        "fact": f"Keeper{i} tends lamp {i} at the lighthouse"})
    for i in (24, 3, 17):
        found = await memory.call("texture_search", {"query": f"what does Keeper{i} tend?", "limit": 5})
        first = [r for r in found["results"] if r["metadata"]["kind"] == "edge"][0]
        assert first["metadata"]["subject"] == f"Keeper{i}" and first["metadata"]["named"] is True

"""Forgetting a turn (pps_messages_forgotten): its episode, the facts extracted only from it and the entities only
it mentioned leave the graph (read directly); what other turns said stays."""

from __future__ import annotations


async def test_a_forgotten_turn_leaves_the_graph(graph_memory, scripted_llm):
    memory = await graph_memory(llm={"base_url": scripted_llm.base_url, "model": "scripted"},
                                graphiti={"background_ingest": False})
    for text in ("Jeff adopted a kitten named Pixel", "Brandi drove Nexus home"):
        await memory.call("store_message", {"content": text, "author_name": "Jeff", "channel": "terminal"})
    assert (await memory.call("ingest_batch_to_graphiti", {"batch_size": 5}))["ingested"] == 2
    graph = memory.require_layer("rich_texture").graph
    before = await graph.counts()
    assert before["episodes"] == 2 and before["facts"] == 2

    out = await memory.call("forget_turns", {"ids": [2], "requested_by": "Brandi"})
    assert out["forgotten"] == [2] and "incomplete" not in out
    after = await graph.counts()
    assert after["episodes"] == 1 and after["facts"] == 1
    names = {r["name"] for r in await graph.query("MATCH (ep:Episodic) RETURN ep.name AS name")}
    assert names == {"turn 1"}
    facts = [r["fact"] for r in await graph.query("MATCH (e:RelatesToNode_) RETURN e.fact AS fact")]
    assert facts == ["Jeff adopted a kitten named Pixel"]
    entities = {r["name"] for r in await graph.query("MATCH (n:Entity) RETURN n.name AS name")}
    assert "Brandi" not in entities and "Nexus" not in entities and "Pixel" in entities
    found = await memory.call("texture_search", {"query": "Brandi drove Nexus"})
    assert all("Brandi" not in r["content"] for r in found["results"])
    health = (await memory.call("pps_health"))["layers"]["rich_texture"]["counts"]
    assert health["episodes"] == 1 and health["facts"] == 1


async def test_forgetting_with_the_graph_closed_says_what_is_incomplete(graph_memory):
    memory = await graph_memory()
    await memory.call("store_message", {"content": "Jeff met Brandi", "author_name": "Jeff", "channel": "terminal"})
    layer = memory.require_layer("rich_texture")
    graph, layer.graph = layer.graph, None
    try:
        out = await memory.call("forget_turns", {"ids": [1]})
    finally:
        layer.graph = graph
    assert out["forgotten"] == [1] and any("graph is not open" in p for p in out["incomplete"])

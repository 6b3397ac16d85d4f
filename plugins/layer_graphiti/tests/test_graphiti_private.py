"""texture_add and texture_add_triplet capture text into the graph: their <private> spans are dropped before
anything is stored or sent to the LLM (issue 22, item 10), with pps_core.privacy's one filter (nested spans:
the outermost wins)."""

from __future__ import annotations

import json

import pytest

from pps_core.errors import InvalidParams


async def graph_bytes(memory) -> str:
    graph = memory.require_layer("rich_texture").graph
    rows = await graph.query("MATCH (n) RETURN n.name AS name, n.summary AS summary, n.content AS content, "
                             "n.fact AS fact, n.source_description AS source")
    return json.dumps(rows, default=str)


async def test_texture_add_drops_private_spans_before_storing_or_asking_the_llm(graph_memory, scripted_llm):
    memory = await graph_memory(llm={"base_url": scripted_llm.base_url, "model": "scripted"},
                                graphiti={"background_ingest": False})
    added = await memory.call("texture_add", {
        "content": "Jeff told Brandi <private>the zqprivcanary code</private> at noon "
                   "and <private>a <PRIVATE>zqnestcanary</private> zqtailcanary</private> then left",
        "channel": "notes <private>zqchannelcanary</private>"})
    assert added["facts"]
    sent = json.dumps(scripted_llm.requests)
    stored = await graph_bytes(memory)
    for canary in ("zqprivcanary", "zqnestcanary", "zqtailcanary", "zqchannelcanary"):
        assert canary not in sent and canary not in stored, canary
    assert "Jeff told Brandi at noon and then left" in stored


async def test_a_triplet_drops_private_spans(graph_memory):
    memory = await graph_memory()
    made = await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "knows", "target": "Brandi",
                                                     "fact": "Jeff knows <private>zqtripletcanary</private> Brandi"})
    assert made["fact"] == "Jeff knows Brandi"
    assert "zqtripletcanary" not in await graph_bytes(memory)


async def test_content_that_is_only_private_is_refused(graph_memory, scripted_llm):
    memory = await graph_memory(llm={"base_url": scripted_llm.base_url, "model": "scripted"},
                                graphiti={"background_ingest": False})
    with pytest.raises(InvalidParams, match="private") as err:
        await memory.call("texture_add", {"content": "<private>zqonlycanary</private>"})
    assert err.value.param == "content"
    assert scripted_llm.requests == []

"""A fact a forgotten turn wrote, which a later turn repeated (issue 35 item 3).

graphiti merges a later turn's duplicate fact into the earlier edge: the edge keeps the earlier turn's fact text
and embedding, and the later turn's episode joins its list. Forgetting the earlier turn kept the edge (another
episode supports it) with that text, and entity summaries were rebuilt from it: the forgotten words stayed in
search answers and the graph's file. The scripted LLM here (the only stand-in allowed) calls every new fact a
duplicate of the first existing one, as a real model does for a paraphrase.
"""

from __future__ import annotations

import re

from .conftest import GraphLLM
from .test_graphiti_forget_traces import disk_hits, store, summaries

CANARY = "zqdupcanary"


class DuplicatingLLM(GraphLLM):
    def answer(self, name: str, schema: dict, messages: list[dict]) -> dict:
        if name == "EdgeDuplicate":
            text = "\n".join(m["content"] for m in messages)
            existing = re.search(r"<EXISTING FACTS>(.*?)</EXISTING FACTS>", text, re.S)
            return {"duplicate_facts": [0] if existing and "idx" in existing.group(1) else [],
                    "contradicted_facts": []}
        return super().answer(name, schema, messages)


async def test_a_fact_written_from_a_forgotten_turn_leaves_with_it_though_a_later_turn_repeated_it(graph_memory,
                                                                                                  pps_home):
    with DuplicatingLLM() as llm:
        memory = await graph_memory(llm={"base_url": llm.base_url, "model": "scripted"},
                                    graphiti={"background_ingest": False})
        await store(memory, f"Ada tends Lamp with the {CANARY} oil", "Ada tends Lamp every night")
        assert (await memory.call("ingest_batch_to_graphiti", {"batch_size": 5}))["ingested"] == 2
        graph = memory.require_layer("rich_texture").graph
        rows = await graph.query("MATCH (e:RelatesToNode_) RETURN e.fact AS fact, e.episodes AS episodes")
        assert len(rows) == 1 and CANARY in rows[0]["fact"] and len(rows[0]["episodes"]) == 2  # merged

        out = await memory.call("forget_turns", {"ids": [1]})
        assert out["forgotten"] == [1] and "incomplete" not in out
    facts = [r["fact"] for r in await graph.query("MATCH (e:RelatesToNode_) RETURN e.fact AS fact")]
    assert not any(CANARY in f for f in facts), facts
    assert not any(CANARY in s for s in (await summaries(memory)).values())
    found = await memory.call("texture_search", {"query": "Ada tends Lamp", "limit": 20, "node_limit": 20})
    assert not any(CANARY in r["content"] for r in found["results"])
    assert {r["name"] for r in await graph.query("MATCH (ep:Episodic) RETURN ep.name AS name")} == {"turn 2"}
    assert disk_hits(pps_home / "testentity" / "graphiti", [CANARY]) == {}

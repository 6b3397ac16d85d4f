"""Ingestion of captured turns (scripted LLM on loopback), errors, reopening, an unavailable graph."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from pps_core.errors import InvalidParams, NotFound, Unavailable


async def store(memory, *texts):
    for t in texts:
        await memory.call("store_message", {"content": t, "author_name": "Jeff", "channel": "terminal"})


async def test_without_an_llm_ingestion_says_so_and_keeps_the_queue(graph_memory):
    memory = await graph_memory()
    await store(memory, "Jeff adopted a kitten named Pixel", "Lyra painted the door")
    with pytest.raises(Unavailable, match="needs an LLM"):
        await memory.call("ingest_batch_to_graphiti", {"batch_size": 5})
    with pytest.raises(Unavailable, match="needs an LLM"):
        await memory.call("texture_add", {"content": "Brandi visited Nexus"})
    stats = await memory.call("graphiti_ingestion_stats")
    assert stats["uningested"] == 2 and not stats["llm_configured"] and not stats["worker_running"]
    health = await memory.call("pps_health")
    assert health["layers"]["rich_texture"]["backlog"] == {"uningested": 2}
    startup = await memory.call("ambient_recall", {"context": "startup"})
    assert "2 uningested to Graphiti (graph ingestion is off: no [llm] configured)" in startup["text"]


async def test_ingest_batch_with_a_scripted_llm(graph_memory, scripted_llm):
    memory = await graph_memory(llm={"base_url": scripted_llm.base_url, "model": "scripted"},
                                graphiti={"background_ingest": False})
    await store(memory, "Jeff adopted a kitten named Pixel", "Brandi drove Nexus home", "nothing to see")
    first = await memory.call("ingest_batch_to_graphiti", {"batch_size": 2})
    assert first["ingested"] == 2 and first["remaining"] == 1 and first["facts_extracted"] == 2
    assert "ExtractedEntities" in scripted_llm.schemas  # graphiti's own response models, json_schema mode
    out = await memory.call("texture_search", {"query": "kitten named Pixel"})
    assert out["results"][0]["content"] == "Jeff adopted a kitten named Pixel"

    scripted_llm.fail = True  # a down LLM: nothing leaves the queue
    with pytest.raises(Unavailable, match="nothing left the queue"):
        await memory.call("ingest_batch_to_graphiti", {"batch_size": 5})
    assert (await memory.call("graphiti_ingestion_stats"))["uningested"] == 1
    scripted_llm.fail = False
    assert (await memory.call("ingest_batch_to_graphiti", {"batch_size": 5}))["remaining"] == 0

    added = await memory.call("texture_add", {"content": "Brandi visited Nexus yesterday"})
    assert set(added["entities"]) >= {"Brandi", "Nexus"} and added["facts"]


async def test_background_worker_ingests_stored_turns(graph_memory, scripted_llm):
    memory = await graph_memory(llm={"base_url": scripted_llm.base_url, "model": "scripted"},
                                graphiti={"ingest_interval_s": 0.2})
    await store(memory, "Jeff planted Tomatoes")  # capture returns at once; the worker follows
    for _ in range(100):
        if (await memory.call("graphiti_ingestion_stats"))["uningested"] == 0:
            break
        await asyncio.sleep(0.1)
    stats = await memory.call("graphiti_ingestion_stats")
    assert stats["uningested"] == 0 and stats["worker_running"] and stats["graph"]["episodes"] == 1


async def test_bad_uuids_and_dates_get_clear_errors(graph_memory):
    memory = await graph_memory()
    await memory.call("texture_add_triplet", {"source": "Lyra", "relationship": "knows", "target": "Jeff"})
    with pytest.raises(InvalidParams, match="not a uuid") as err:
        await memory.call("texture_delete", {"uuid": "../../etc/passwd"})
    assert err.value.param == "uuid"
    with pytest.raises(NotFound, match="no fact, entity or episode"):
        await memory.call("texture_delete", {"uuid": str(uuid.uuid4())})
    with pytest.raises(InvalidParams) as err:
        await memory.call("texture_timeline", {"since": "last tuesday"})
    assert err.value.param == "since"
    with pytest.raises(InvalidParams, match="before until"):
        await memory.call("texture_timeline", {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"})
    with pytest.raises(InvalidParams) as err:
        await memory.call("texture_add_triplet", {"source": "A", "relationship": "r", "target": "B",
                                                  "valid_at": "2026-13-45"})
    assert err.value.param == "valid_at"
    with pytest.raises(InvalidParams, match="relationship"):
        await memory.call("texture_add_triplet", {"source": "A", "relationship": "!!!", "target": "B"})
    with pytest.raises(InvalidParams, match="source"):
        await memory.call("texture_add_triplet", {"source": "   ", "relationship": "r", "target": "B"})
    with pytest.raises(NotFound, match="no entity named"):
        await memory.call("texture_explore", {"entity_name": "Nobody"})
    with pytest.raises(InvalidParams):
        await memory.call("texture_explore", {"entity_name": "Lyra", "depth": 9})
    assert (await memory.call("pps_health"))["layers"]["rich_texture"]["counts"]["facts"] == 1  # nothing half-written


async def test_reopening_an_existing_graph(graph_memory, make_memory, pps_home):
    memory = await graph_memory()
    made = await memory.call("texture_add_triplet", {"source": "Lyra", "relationship": "keeps", "target": "a journal",
                                                     "fact": "Lyra keeps a leather journal"})
    await memory.call("texture_search", {"query": "leather journal"})  # novelty counts get written at close
    await memory.close()

    again = await graph_memory()  # same home: the Kuzu file, its indexes and the counts are there
    out = await again.call("texture_search", {"query": "leather journal", "node_limit": 0})
    assert [r["source"] for r in out["results"]] == [made["uuid"]]
    later = time.time() + 600  # once this moment has passed, the earlier surfacing counts against the fact
    assert again.rankers["novelty"].count("rich_texture", made["uuid"], now=later) == pytest.approx(1.0, abs=0.01)
    assert (await again.call("pps_health"))["layers"]["rich_texture"]["counts"]["facts"] == 1


async def test_graph_unavailable_recall_still_answers(graph_memory):
    import socket

    with socket.socket() as s:  # a port nothing listens on: the FalkorDB server is "down"
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    memory = await graph_memory(graphiti={"driver": "falkordb", "port": port})
    await store(memory, "The lighthouse keeper painted the door blue")
    health = (await memory.call("pps_health"))["layers"]["rich_texture"]
    assert not health["available"]
    out = await memory.call("ambient_recall", {"context": "lighthouse door"})
    status = {s["layer"]: s["status"] for s in out["layers"]}
    assert status["rich_texture"] == "unavailable" and status["raw_capture"] == "ok"
    assert "lighthouse keeper" in out["text"]
    with pytest.raises(Exception, match="unavailable"):
        await memory.call("texture_search", {"query": "lighthouse"})

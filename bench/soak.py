"""Memory over a long life: a real ``pps serve http`` answering thousands of mixed graph calls and backups.

    .venv/bin/python bench/soak.py [--calls 2000] [--backups 5] [--every 500] [--facts 300] [--graph-only]

Two servers, one after the other, each on a fresh entity with the same turns stored: one with the graph
(sqlite, embeddings, graphiti, http) and one without it (sqlite, embeddings, http). Each gets the same calls in
the same order: ``texture_search``, ``texture_add_triplet``, ``ambient_recall`` with a context,
``texture_entities``, ``texture_facts`` and ``texture_explore`` in turn (the server without a graph answers the
graph's operations 404, and its recall has one layer fewer), and ``pps_backup`` ``--backups`` times spread over
the run. Printed every ``--every`` calls: the serving process's RSS, and the graph engine's (the engine process
``pps_graphiti.engine``, recycled by the server past ``[graphiti] engine_max_rss_mb``), then the growth of each
from the first sample to the last. Loopback only, local embedder, no LLM.

Issue 36's target: the serving process grows less than 50 MB over 2,000 graph calls (it grew 1,125 MB when Kuzu
ran inside it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core.testing.server import init_entity, start_server  # noqa: E402

WORDS = ("garden kitchen lighthouse harbour orchard violin journal balcony river ridge bakery library studio "
         "workshop greenhouse observatory ferry cabin market chapel").split()
PEOPLE = "Jeff Brandi Nexus Caia Mara Theo Iris Jonah Wren Sable".split()


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def engines_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) != pid:
                continue
            if b"pps_graphiti.engine" in (entry / "cmdline").read_bytes():
                out.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return out


def call_for(i: int) -> tuple[str, dict]:
    person, place, other = PEOPLE[i % len(PEOPLE)], WORDS[i % len(WORDS)], WORDS[(i * 7 + 3) % len(WORDS)]
    kind = i % 6
    if kind == 0:
        return "texture_search", {"query": f"{person} and the {place}"}
    if kind == 1:
        return "texture_add_triplet", {"source": person, "relationship": "VISITS", "target": f"{place} {i}",
                                       "fact": f"{person} visits the {place} {i} with the {other}"}
    if kind == 2:
        return "ambient_recall", {"context": f"what did {person} do at the {place}?"}
    if kind == 3:
        return "texture_entities", {"offset": (i * 13) % 50, "limit": 20}
    if kind == 4:
        return "texture_facts", {"offset": (i * 17) % 100, "limit": 50}
    return "texture_explore", {"entity_name": person, "depth": 2}


def soak(graph: bool, args) -> list[tuple[int, float, float]]:
    plugins = "sqlite,embeddings,graphiti,http" if graph else "sqlite,embeddings,http"
    samples: list[tuple[int, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        init_entity(root, "soak", plugins)
        server = start_server(root, "--entity", "soak", timeout=180)
        try:
            turns = [{"content": f"{PEOPLE[i % 10]} went to the {WORDS[i % 20]} again", "author_name": "Jeff",
                      "channel": "terminal"} for i in range(200)]
            assert server.call("store_messages", {"messages": turns}, timeout=300).status_code == 200
            if graph:
                for i in range(args.facts):
                    server.call("texture_add_triplet", {"source": PEOPLE[i % 10], "relationship": "KNOWS",
                                                        "target": f"{WORDS[i % 20]} {i}"}, timeout=120)
            for i in range(6):  # warm: the embedder loaded, each operation run once, before the first sample
                server.call(*call_for(i), timeout=300)
            backups_at = {int(args.calls * (k + 1) / (args.backups + 1)) for k in range(args.backups)}
            codes: dict[int, int] = {}
            started = time.perf_counter()
            for i in range(args.calls + 1):
                if i % args.every == 0:
                    engine = sum(rss_mib(p) for p in engines_of(server.proc.pid))
                    samples.append((i, rss_mib(server.proc.pid), engine))
                    print(f"{'graph' if graph else 'no graph':>8}  calls {i:>5}  server RSS {samples[-1][1]:7.1f} MiB"
                          f"  engine RSS {engine:7.1f} MiB  ({time.perf_counter() - started:.0f} s)", flush=True)
                if i == args.calls:
                    break
                if i in backups_at:
                    r = server.call("pps_backup", {"path": f"soak-{i}.tar.gz"}, timeout=600)
                    codes[r.status_code] = codes.get(r.status_code, 0) + 1
                op, params = call_for(i)
                r = server.call(op, params, timeout=120)
                codes[r.status_code] = codes.get(r.status_code, 0) + 1
            print(f"{'graph' if graph else 'no graph':>8}  answers by status: {dict(sorted(codes.items()))}")
        finally:
            server.stop()
    return samples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--backups", type=int, default=5)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--facts", type=int, default=300, help="triplets written before the soak")
    ap.add_argument("--graph-only", action="store_true",
                    help="only the server with the graph (e.g. run by another checkout's python, as a before)")
    args = ap.parse_args()
    with_graph = soak(True, args)
    if args.graph_only:
        print(f"\nserver growth over {args.calls} calls and {args.backups} backups: "
              f"{with_graph[-1][1] - with_graph[0][1]:+.1f} MiB")
        return
    without = soak(False, args)
    print("\n| calls | server RSS, graph (MiB) | graph engine RSS (MiB) | server RSS, no graph (MiB) |")
    print("|------:|------------------------:|-----------------------:|---------------------------:|")
    for (i, rss, engine), (_j, base, _e) in zip(with_graph, without, strict=True):
        print(f"| {i:>5} | {rss:>23.1f} | {engine:>22.1f} | {base:>26.1f} |")
    grow = with_graph[-1][1] - with_graph[0][1]
    base_grow = without[-1][1] - without[0][1]
    print(f"\nserver growth over {args.calls} calls and {args.backups} backups: with the graph {grow:+.1f} MiB, "
          f"without {base_grow:+.1f} MiB (difference {grow - base_grow:+.1f} MiB); graph engine "
          f"{with_graph[-1][2] - with_graph[0][2]:+.1f} MiB. Target: under 50 MB: {'MET' if grow < 50 else 'MISSED'}")


if __name__ == "__main__":
    main()

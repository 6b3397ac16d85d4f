"""First contact: how long a serverless `pps` command takes, beside same-run baselines (issue 23).

    .venv/bin/python bench/cli.py [--runs 7] [--turns 300] [--load 2]

An entity on the default plugin set (every default plugin installed here), a few hundred turns, a crystal,
a word-photo and a graph fact; then each command is run `--runs` times as a user runs it (a new process, no
server) and timed from start to exit. Baselines in the same run: a bare `python -c` that opens the same
SQLite file and runs the same query as `get_turns_since`, and `pps --version`.
Targets: a SQLite read p50 < 1 s; any operation < 2 s; an unknown operation or a bad parameter < 0.5 s.
``--load N`` (default 2: a laptop compiling something, issue 39) runs every command again with N busy processes of
our own, in the same run (one table each: idle, then loaded; ``--load 0``: idle only).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PPS = str(Path(sys.executable).parent / "pps")
SINCE = "2026-01-01T00:00:00"
#: The query get_turns_since runs for its first page (turns after a time, oldest first).
BASELINE = ("import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\n"
            "rows = c.execute(\"SELECT id, content, author_name, channel, created_at FROM messages "
            "WHERE created_at >= ? ORDER BY created_at, id LIMIT 50\", (sys.argv[2],)).fetchall()\n"
            "print(len(rows))\n")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def timed(argv: list[str], env: dict[str, str], runs: int, ok: int = 0) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system, the process and its children) of each run."""
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != ok:
            raise SystemExit(f"{' '.join(argv[:4])}... exited {done.returncode}: {done.stderr[-800:]}")
    return wall, cpu


def setup(root: Path, turns: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")}
    env.update(PPS_ROOT=str(root), HOME=str(root), PPS_ENTITY="bench")
    subprocess.run([PPS, "init", "--timezone", "UTC"], env=env, check=True, capture_output=True)
    messages = [{"content": f"Turn {i}: the garden beds want cedar, and the kitchen light flickers again.",
                 "author_name": "Jeff" if i % 2 else "Lyra", "channel": "terminal",
                 "created_at": f"2026-02-{1 + i % 27:02d}T{i % 24:02d}:00:00"} for i in range(turns)]
    for op, params in [("store_messages", {"messages": messages}),
                       ("crystallize", {"content": "Session focus: the garden and the kitchen light."}),
                       ("anchor_save", {"title": "First snow", "content": "The first snow on the harbor wall."}),
                       ("texture_add_triplet", {"source": "Brandi", "relationship": "RECOMMENDS",
                                                "target": "cedar"})]:
        subprocess.run([PPS, "call", op, json.dumps(params)], env=env, check=True, capture_output=True)
    # every turn embedded, as a server's background work leaves them: raw_search is timed without the
    # up to 32 pending turns a search embeds first (read your writes)
    subprocess.run([PPS, "reindex"], env=env, check=True, capture_output=True)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--load", type=int, default=2, help="run every command again with N busy processes "
                                                             "(default 2; 0: idle only)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = setup(root, args.turns)
        plugins = subprocess.run([PPS, "plugins", "--json"], env=env, capture_output=True, text=True, check=True)
        loaded = [p["name"] for p in json.loads(plugins.stdout)["loaded"]]
        db = root / "bench" / "pps.db"
        report(measure_all(env, db, args.runs), loaded, args, "idle")
        if args.load:
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
            try:
                time.sleep(5)  # let the load average feel them
                report(measure_all(env, db, args.runs), loaded, args, f"load+{args.load} (busy processes)")
            finally:
                for b in busy:
                    b.kill()
    print("wall p50/max per command (a new process each run, no server); cpu = user + system seconds of that "
          "process and its children, the floor of its wall time on an idle machine; 'met (cpu)' judges the "
          "target on that floor (what an idle machine would show), 'met' on the wall time of this run")


Row = tuple[str, list[float], list[float], str, "float | None"]


def measure_all(env: dict[str, str], db: Path, runs: int) -> list[Row]:
    rows: list[Row] = []

    def measure(label: str, argv: list[str], target: str, limit: float | None, ok: int = 0) -> None:
        rows.append((label, *timed(argv, env, runs, ok), target, limit))

    measure("baseline: python -c sqlite3 query", [sys.executable, "-c", BASELINE, str(db), SINCE], "", None)
    measure("baseline: pps --version", [PPS, "--version"], "", None)
    read = json.dumps({"timestamp": SINCE, "limit": 50})
    measure("get_turns_since (SQLite read)", [PPS, "call", "get_turns_since", read], "p50 < 1 s", 1.0)
    measure("summary_stats (SQLite read)", [PPS, "call", "summary_stats"], "p50 < 1 s", 1.0)
    measure("raw_search (SQLite + embedder)", [PPS, "call", "raw_search", '{"query": "cedar garden"}'],
            "< 2 s", 2.0)
    measure("crystal_list", [PPS, "call", "crystal_list"], "< 2 s", 2.0)
    measure("anchor_search (ChromaDB)", [PPS, "call", "anchor_search", '{"query": "snow"}'], "< 2 s", 2.0)
    measure("texture_search (graph)", [PPS, "call", "texture_search", '{"query": "cedar"}'], "< 2 s", 2.0)
    measure("ambient_recall startup (every layer)",
            [PPS, "call", "ambient_recall", '{"context": "startup"}'], "< 2 s", 2.0)
    measure("store_message (a write: every layer)",
            [PPS, "call", "store_message", '{"content": "one more", "author_name": "J", "channel": "t"}'],
            "< 2 s", 2.0)
    measure("unknown operation (raw_serch)", [PPS, "call", "raw_serch", '{"query": "x"}'], "< 0.5 s", 0.5, ok=2)
    measure("bad parameter (qurey)", [PPS, "call", "raw_search", '{"qurey": "x"}'], "< 0.5 s", 0.5, ok=2)
    measure("bad uuid (texture_delete: no store opens)",
            [PPS, "call", "texture_delete", '{"uuid": "not-a-uuid"}'], "< 0.5 s", 0.5, ok=2)
    measure("pps call raw_search --help", [PPS, "call", "raw_search", "--help"], "< 0.5 s", 0.5)
    measure("pps health", [PPS, "health"], "< 2 s", 2.0)
    return rows


def report(rows: list[Row], loaded: list[str], args: argparse.Namespace, phase: str) -> None:
    base_sql = pct(rows[0][1], 50)
    base_version = pct(rows[1][1], 50)
    load = os.getloadavg()
    print(f"{phase}: entity on {', '.join(loaded)}; {args.turns} turns; {args.runs} runs each; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    print(f"{'command':<40} {'p50 s':>7} {'max s':>7} {'cpu s':>6} {'cpu max':>7} {'x sqlite':>9} "
          f"{'x --version':>11}  target    met  met (cpu)")

    def met(values: list[float], target: str, limit: float | None) -> str:
        return "" if limit is None else ("yes" if (pct(values, 50) if "p50" in target else max(values)) < limit
                                         else "NO")

    for label, wall, cpu, target, limit in rows:
        p50, worst = pct(wall, 50), max(wall)
        print(f"{label:<40} {p50:7.3f} {worst:7.3f} {pct(cpu, 50):6.2f} {max(cpu):7.2f} {p50 / base_sql:9.1f} "
              f"{p50 / base_version:11.2f}  {target:<9} {met(wall, target, limit):<4} {met(cpu, target, limit)}")
    print()


if __name__ == "__main__":
    main()

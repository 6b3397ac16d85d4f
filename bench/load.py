"""Load on one entity through a real `pps serve http` on 127.0.0.1, then an audit of the store.

    .venv/bin/python bench/load.py                 # 60 s, 4 writer channels, 2 readers, 1 summarizer
    .venv/bin/python bench/load.py --seconds 10 --writers 8
    .venv/bin/python bench/load.py --postgres      # also: postgres, 1 server and 2 servers x the writers

Writers send store_message / store_messages with client message_ids (15% repeats on purpose);
readers call ambient_recall, raw_search and poll_channels; a summarizer calls summarize_messages +
store_summary. Afterwards the SQLite file is read directly: every acknowledged turn present exactly
once under the id the server answered, summaries over disjoint, fully marked ranges. Baseline in the
same run: one writer alone (no readers, no summarizer) for a fifth of the time. ``--postgres`` adds, in the
same run, the load on a PostgreSQL-backed entity (pps-postgres; a pgserver in a temp dir) through one server,
and through two servers of that one entity (two homes, as on two machines) with the writers and readers
per server; the audit reads the PostgreSQL tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from pps_sqlite.testing import audit
from pps_turns.loadgen import report, run_load

from pps_core.testing.server import init_entity, start_server


def one_run(root: Path, name: str, seconds: float, writers: int, readers: int, summarizer: bool, plugins: str):
    init_entity(root, name, plugins)
    server = start_server(root, "--entity", name, log_name=f"{name}.log")
    try:
        tally = run_load(server, name, seconds=seconds, writers=writers, readers=readers, summarizer=summarizer)
    finally:
        server.stop()
    result = report(tally, audit(root / name / "pps.db", tally))
    result["traceback_in_log"] = "Traceback" in server.log.read_text()
    return result


def pg_run(root: Path, name: str, dsn: str, servers: int, seconds: float, writers: int, readers: int,
           plugins: str):
    from concurrent.futures import ThreadPoolExecutor

    from pps_postgres.testing import audit as pg_audit

    plugins = ",".join(["postgres"] + [p for p in plugins.split(",") if p not in ("sqlite", "postgres")])
    roots = [root / f"{name}-machine{i}" for i in range(servers)]
    for r in roots:
        r.mkdir()
        init_entity(r, name, plugins, "[postgres]", f"dsn = {dsn!r}", f"schema = {name!r}")
    with ThreadPoolExecutor(servers) as pool:
        running = list(pool.map(lambda r: start_server(r, "--entity", name, log_name=f"{name}.log"), roots))
    try:
        tally = run_load(running, name, seconds=seconds, writers=writers * servers, readers=readers * servers,
                         summarizer=True)
    finally:
        for server in running:
            server.stop()
    result = report(tally, pg_audit(dsn, name, tally))
    result["traceback_in_log"] = any("Traceback" in s.log.read_text() for s in running)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--plugins", default="sqlite,crystals,mcp,http")
    ap.add_argument("--postgres", action="store_true", help="also postgres: one server, then two of one entity")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pps-load-") as tmp:
        root = Path(tmp)
        base = one_run(root, "baseline", max(3.0, args.seconds / 5), 1, 0, False, args.plugins)
        load = one_run(root, "load", args.seconds, args.writers, args.readers, True, args.plugins)
        runs = {"baseline": base, "load": load}
        if args.postgres:
            from pps_postgres.testing import start_postgres

            dsn, cleanup = start_postgres()
            try:
                runs["pg 1 server"] = pg_run(root, "pg1", dsn, 1, args.seconds, args.writers, args.readers,
                                             args.plugins)
                runs["pg 2 servers"] = pg_run(root, "pg2", dsn, 2, args.seconds, args.writers, args.readers,
                                              args.plugins)
            finally:
                cleanup()
    if args.json:
        print(json.dumps(runs, indent=2))
    else:
        print(f"{'run':<12} {'seconds':>7} {'turns/s':>8} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} "
              f"{'write p95':>9} {'read p95':>8} {'summaries':>9} {'lost':>5}")
        for label, r in runs.items():
            print(f"{label:<12} {r['seconds']:>7} {r['turns_per_s']:>8} {r['requests_per_s']:>7} {r['p50_ms']:>7} "
                  f"{r['p95_ms']:>7} {r['write_p95_ms']:>9} {r['read_p95_ms']:>8} {r['audit']['summaries']:>9} "
                  f"{len(r['audit']['problems']):>5}")
        print(f"\nload: {args.writers} writers, {args.readers} readers, 1 summarizer; {load['turns_acked']} turns "
              f"acknowledged, {load['repeats_sent']} repeats sent, {load['audit']['turns']} rows stored, "
              f"{load['audit']['summarized_turns']} summarized in {load['audit']['summaries']} summaries "
              f"({load['summary_conflicts']} refused as concurrent); statuses {load['statuses']}")
        print("per-operation p95 ms: " + ", ".join(f"{k} {v}" for k, v in load["per_op_p95_ms"].items()))
        print("baseline: one writer alone, no readers or summarizer, same server build")
        if args.postgres:
            print(f"pg 1 server: {args.writers} writers, {args.readers} readers, 1 summarizer on postgres; "
                  f"pg 2 servers: two servers of one entity, {args.writers} writers and {args.readers} readers "
                  "each, 1 summarizer")
        for r in runs.values():
            for p in r["audit"]["problems"] + r["errors"]:
                print("PROBLEM:", p)
    ok = all(not r["audit"]["problems"] and not r["errors"] and not r["traceback_in_log"] for r in runs.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

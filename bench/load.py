"""Load on one entity through a real `pps serve http` on 127.0.0.1, then an audit of the store.

    .venv/bin/python bench/load.py                 # 60 s, 4 writer channels, 2 readers, 1 summarizer
    .venv/bin/python bench/load.py --seconds 10 --writers 8

Writers send store_message / store_messages with client message_ids (15% repeats on purpose);
readers call ambient_recall, raw_search and poll_channels; a summarizer calls summarize_messages +
store_summary. Afterwards the SQLite file is read directly: every acknowledged turn present exactly
once under the id the server answered, summaries over disjoint, fully marked ranges. Baseline in the
same run: one writer alone (no readers, no summarizer) for a fifth of the time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from pps_sqlite.loadgen import audit, report, run_load

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--plugins", default="sqlite,crystals,mcp,http")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pps-load-") as tmp:
        root = Path(tmp)
        base = one_run(root, "baseline", max(3.0, args.seconds / 5), 1, 0, False, args.plugins)
        load = one_run(root, "load", args.seconds, args.writers, args.readers, True, args.plugins)
    if args.json:
        print(json.dumps({"baseline": base, "load": load}, indent=2))
    else:
        print(f"{'run':<10} {'seconds':>7} {'turns/s':>8} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} "
              f"{'write p95':>9} {'read p95':>8} {'summaries':>9} {'lost':>5}")
        for label, r in (("baseline", base), ("load", load)):
            print(f"{label:<10} {r['seconds']:>7} {r['turns_per_s']:>8} {r['requests_per_s']:>7} {r['p50_ms']:>7} "
                  f"{r['p95_ms']:>7} {r['write_p95_ms']:>9} {r['read_p95_ms']:>8} {r['audit']['summaries']:>9} "
                  f"{len(r['audit']['problems']):>5}")
        print(f"\nload: {args.writers} writers, {args.readers} readers, 1 summarizer; {load['turns_acked']} turns "
              f"acknowledged, {load['repeats_sent']} repeats sent, {load['audit']['turns']} rows stored, "
              f"{load['audit']['summarized_turns']} summarized in {load['audit']['summaries']} summaries "
              f"({load['summary_conflicts']} refused as concurrent); statuses {load['statuses']}")
        print("per-operation p95 ms: " + ", ".join(f"{k} {v}" for k, v in load["per_op_p95_ms"].items()))
        print("baseline: one writer alone, no readers or summarizer, same server build")
        for r in (base, load):
            for p in r["audit"]["problems"] + r["errors"]:
                print("PROBLEM:", p)
    ok = all(not r["audit"]["problems"] and not r["errors"] and not r["traceback_in_log"] for r in (base, load))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""What knowing a turn by what it is costs at capture (issue 35 item 4).

    .venv/bin/python bench/turn_identity.py [--history 20000] [--batch 200] [--rounds 5] [--baseline REV]

Since issue 35 a turn is tombstoned by its digest (channel, author, time, content) as well as by its message_id,
and one stored without a message_id that comes back with one (an export re-imported) is recognised. Capture
checks a second tombstone per turn, and a turn with a new message_id looks for the same turn stored without one.
This times ``pps_sqlite.turns.store`` itself over a history of ``--history`` turns, in the same run and on copies
of the same database, against the same function as it was at ``--baseline`` (a git revision, default the commit
before issue 35): plain turns (no message_id), turns with fresh message_ids (a hook, an importer), and a re-import
of turns already stored (every one a repeat). Rounds alternate, so load on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pps_sqlite import turns as current  # noqa: E402
from pps_sqlite.db import connect  # noqa: E402
from pps_sqlite.schema import migrate  # noqa: E402

WORDS = "garden kitchen light cedar coffee memory river lamp book music rain sun window door".split()


def load_revision(rev: str):
    """``pps_sqlite.turns`` as it was at ``rev``, imported beside the current one."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:plugins/layer_sqlite/pps_sqlite/turns.py"],
                            check=True, capture_output=True, text=True).stdout
    tmp = Path(tempfile.mkdtemp()) / "turns_baseline.py"
    tmp.write_text(source)
    spec = importlib.util.spec_from_file_location("pps_sqlite.turns_baseline", tmp,
                                                  submodule_search_locations=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "pps_sqlite"
    spec.loader.exec_module(module)
    return module


def turn(i: int, mid: str | None) -> dict:
    words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12))
    return {"content": f"{words} {i}", "author_name": "Jeff" if i % 2 else "Lyra", "channel": f"terminal:{i % 7}",
            "session_id": None, "created_at": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:"
            f"{(i // 60) % 60:02d}.{i % 1000:03d}Z", "metadata": {}, "message_id": mid}


def timed(module, db: Path, batches: list[list[dict]]) -> float:
    conn = connect(db)
    try:
        start = time.perf_counter()
        for batch in batches:
            module.store(conn, batch)
        return time.perf_counter() - start
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--history", type=int, default=20_000)
    ap.add_argument("--new", type=int, default=2_000, help="turns captured per measure")
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", default="ab7ead7")
    args = ap.parse_args()
    baseline = load_revision(args.baseline)
    work = Path(tempfile.mkdtemp())
    seed = work / "seed.db"
    conn = connect(seed)
    migrate(conn)
    history = [turn(i, None if i % 2 else f"hook:{i}") for i in range(args.history)]
    for k in range(0, len(history), 1000):
        current.store(conn, history[k:k + 1000])
    conn.close()

    def batches(rows: list[dict]) -> list[list[dict]]:
        return [rows[k:k + args.batch] for k in range(0, len(rows), args.batch)]

    cases = {
        "plain turns (no message_id)": lambda r: batches([turn(args.history + r * args.new + i, None)
                                                          for i in range(args.new)]),
        "turns with new message_ids": lambda r: batches([turn(args.history + r * args.new + i, f"new:{r}:{i}")
                                                         for i in range(args.new)]),
        "re-import of stored turns": lambda r: batches([{**history[i], "message_id": history[i]["message_id"]
                                                         or f"pps:bench:{i + 1}"} for i in range(args.new)]),
    }
    print(f"history {args.history} turns; {args.new} turns per measure in batches of {args.batch}; "
          f"{args.rounds} rounds; baseline = pps_sqlite.turns at {args.baseline}")
    print(f"{'measure':34} {'ours turns/s':>13} {'baseline turns/s':>17} {'ratio':>7}")
    for name, make in cases.items():
        ours, base = [], []
        for r in range(args.rounds):
            for module, out in ((current, ours), (baseline, base)) if r % 2 else ((baseline, base), (current, ours)):
                db = work / f"{len(out)}-{id(module)}.db"
                shutil.copy(seed, db)
                out.append(args.new / timed(module, db, make(r)))
                db.unlink()
        a, b = statistics.median(ours), statistics.median(base)
        print(f"{name:34} {a:13.0f} {b:17.0f} {a / b:7.2f}")
    kept = sqlite3.connect(seed).execute("SELECT count(*) FROM messages").fetchone()[0]
    print(f"(re-import: the baseline stores again each turn that had no message_id; ours stores none. "
          f"seed holds {kept} turns)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

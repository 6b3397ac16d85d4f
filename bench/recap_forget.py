"""What the recap's share of a forget costs now that it remembers entries, not paths (issue 35 item 5).

    .venv/bin/python bench/recap_forget.py [--logs 40] [--lines 2000]

Writes ``--logs`` Claude Code-style session logs of ``--lines`` entries each (``[recap] logs``), then times
``pps_recap.store.forget`` (every entry of every log digested) the first time, and again after each log gained
a few lines (the cursors: only what a log gained is read), against the baseline of the same forget before issue
35 (a stat of each log: path and size). Also the size of ``_recap_forgotten.json`` and what ``read_plan`` costs
(the digests a recap loads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core.settings import load_settings  # noqa: E402
from pps_core.testing.server import init_entity  # noqa: E402


def entry(session: str, n: int) -> dict:
    role = "user" if n % 2 else "assistant"
    text = f"line {n} of {session}: the importer drops rows with a comma inside quotes, again and again"
    content = text if role == "user" else [{"type": "text", "text": text}]
    return {"type": role, "sessionId": session, "uuid": f"{session}-{n}", "timestamp": f"2026-03-14T09:{n % 60:02d}:00Z",
            "message": {"role": role, "content": content}, "cwd": "/home/ana/ledger", "version": "2.0.14"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", type=int, default=40)
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from pps_recap import store

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        logs = root / "logs"
        logs.mkdir()
        home = init_entity(root, "lyra", "sqlite,recap", "[recap]", f'logs = ["{logs}/*.jsonl"]')
        settings = load_settings(None, home, must_exist=True)
        paths = [logs / f"s{i:03d}.jsonl" for i in range(args.logs)]
        for i, path in enumerate(paths):
            path.write_text("".join(json.dumps(entry(f"s{i}", n)) + "\n" for n in range(args.lines)))
        size = sum(p.stat().st_size for p in paths)

        def baseline() -> None:  # before issue 35: each known log's path and size
            marks = {str(p): p.stat().st_size for p in store.candidate_logs(settings)}
            (home / "baseline.json").write_text(json.dumps({"at": time.time(), "logs": marks}))

        t = time.perf_counter()
        store.forget(settings)
        first = time.perf_counter() - t
        again, base, plan = [], [], []
        for r in range(args.rounds):
            for p in paths:
                with p.open("a") as fh:
                    fh.write(json.dumps(entry(p.stem, args.lines + r)) + "\n")
            t = time.perf_counter()
            store.forget(settings)
            again.append(time.perf_counter() - t)
            t = time.perf_counter()
            baseline()
            base.append(time.perf_counter() - t)
            t = time.perf_counter()
            store.read_plan(settings, paths[0])
            plan.append(time.perf_counter() - t)
        marks = (home / store.FORGOTTEN_FILE).stat().st_size
    med = statistics.median
    print(f"{args.logs} logs x {args.lines} entries ({size / 1e6:.1f} MB)")
    print(f"forget, every entry digested (first)     {first * 1000:9.1f} ms")
    print(f"forget, logs grew a line (cursors)       {med(again) * 1000:9.1f} ms   baseline (path, size) "
          f"{med(base) * 1000:7.1f} ms   ratio {med(again) / med(base):.1f}x")
    print(f"read_plan (a recap loads the digests)    {med(plan) * 1000:9.1f} ms")
    print(f"_recap_forgotten.json                    {marks / 1e6:9.2f} MB")


if __name__ == "__main__":
    main()

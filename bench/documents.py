"""Crystals, word-photos and the recap on PostgreSQL beside the files, same run (issue 25).

    .venv/bin/python bench/documents.py [--photos 1000] [--crystals 200] [--runs 100]

One entity on files (crystals/*.md, word-photo files indexed in embedded Chroma, _recap.md: the baseline) and one
on a PostgreSQL (pgserver in a temp dir on this machine: crystals table, word-photo rows + pgvector, the recap
row), the local ONNX MiniLM embedder for both. Measured: crystallize and anchor_save one at a time (the save
includes embedding), then p50/p95 over ``--runs`` calls of get_crystals, crystal_list, anchor_search and the
startup package (which shows crystals, word-photos and the recap), and the RSS of this process after each.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from startup import pct, sentence  # noqa: E402

from pps_core import Memory  # noqa: E402
from pps_core.settings import load_settings  # noqa: E402

QUERIES = ["the lighthouse in winter", "coffee on the balcony", "a walk by the river", "the violin repair",
           "snow over the harbour", "the kitten asleep", "planting the orchard", "a letter from home"]


async def measure(home: Path, n_photos: int, n_crystals: int, runs: int, settings: dict) -> dict:
    rng = random.Random(5)
    out: dict = {}
    plugins = ["crystals", "chroma", "embeddings", "recap"]
    async with Memory(load_settings("bench", home, plugins=plugins, timezone="UTC", **settings)) as m:
        await m.call("anchor_search", {"query": "warm up the model", "limit": 1})
        t0 = time.perf_counter()
        for i in range(n_photos):
            await m.call("anchor_save", {"title": f"moment {i}", "content": " ".join(sentence(rng) for _ in range(3))})
        out["anchor_save /s"] = n_photos / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i in range(n_crystals):
            await m.call("crystallize", {"content": f"Crystal {i}. " + " ".join(sentence(rng) for _ in range(8))})
        out["crystallize /s"] = n_crystals / (time.perf_counter() - t0)
        for name, op, params in [
                ("get_crystals (4)", "get_crystals", lambda i: {"count": 4}),
                ("crystal_list", "crystal_list", lambda i: {}),
                ("anchor_search (10)", "anchor_search", lambda i: {"query": QUERIES[i % len(QUERIES)], "limit": 10}),
                ("ambient_recall startup", "ambient_recall", lambda i: {"context": "startup"})]:
            await m.call(op, params(0))
            lat = []
            for i in range(runs):
                t = time.perf_counter()
                await m.call(op, params(i))
                lat.append((time.perf_counter() - t) * 1000)
            out[name] = (pct(lat, 50), pct(lat, 95))
        out["rss MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--photos", type=int, default=1000)
    ap.add_argument("--crystals", type=int, default=200)
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    from pps_postgres.testing import start_postgres

    dsn, stop = start_postgres()
    try:
        with tempfile.TemporaryDirectory(prefix="pps-docbench-") as tmp:
            files = await measure(Path(tmp) / "files", args.photos, args.crystals, args.runs, {})
            pg = await measure(Path(tmp) / "pg", args.photos, args.crystals, args.runs, {
                "postgres": {"dsn": dsn, "schema": "bench"}, "crystals": {"store": "postgres"},
                "chroma": {"store": "postgres"}, "recap": {"store": "postgres"}})
    finally:
        stop()
    load = open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(f"{args.photos} word-photos, {args.crystals} crystals, {args.runs} runs each; PostgreSQL 16 (pgserver) "
          f"on this machine; load average {load}\n")
    print(f"{'measure':<26} {'files p50':>10} {'p95':>8} {'postgres p50':>13} {'p95':>8} {'p95 ratio':>9}")
    for name in ("get_crystals (4)", "crystal_list", "anchor_search (10)", "ambient_recall startup"):
        (a50, a95), (b50, b95) = files[name], pg[name]
        print(f"{name:<26} {a50:>10.1f} {a95:>8.1f} {b50:>13.1f} {b95:>8.1f} {b95 / a95:>9.2f}")
    for name in ("anchor_save /s", "crystallize /s"):
        print(f"{name:<26} {files[name]:>10.1f} {'':>8} {pg[name]:>13.1f} {'':>8} {pg[name] / files[name]:>9.2f}")
    print(f"{'peak RSS after (MiB)':<26} {files['rss MiB']:>10.0f} {'':>8} {pg['rss MiB']:>13.0f}  (one process, "
          "files first: the PostgreSQL figure includes the files run)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

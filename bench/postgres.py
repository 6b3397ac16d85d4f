"""The PostgreSQL store beside SQLite, same run: recall latency at 20,000 turns and capture throughput.

    .venv/bin/python bench/postgres.py [--turns 20000] [--runs 100] [--vectors] [--only-recall]

``--vectors``: every turn also gets a vector from a hashing embedder (words hashed into 384 dimensions, a
benchmark stand-in for the model: cheap, deterministic, topical enough), so ``raw_search`` is the fused search
(lexical + dense, with the per-channel second pass: three channels, each past 20,000 turns at 200,000) and the
turn index is made before measuring (`pps reindex`'s step: SQLite's ANN, PostgreSQL's HNSW), timed, with turns
captured meanwhile.
``--only-recall``: no capture-throughput measures (a long run at 200,000 turns).

The same Zipfian corpus as bench/startup.py is stored through store_messages into an entity on each store
(plugins sqlite+crystals, then postgres+crystals; PostgreSQL is a pgserver in a temp dir on this machine),
the oldest summarized until 300 stay unsummarized, then: ambient_recall("startup"), a non-startup ambient_recall (lexical layers), raw_search, each p50/p95
over ``--runs`` calls; capture through store_message one turn at a time (turns/s), and by 8 concurrent writers (400 turns). SQLite is the
baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from startup import QUERIES, pct, sentence  # noqa: E402

from pps_core import Memory  # noqa: E402
from pps_core.settings import load_settings  # noqa: E402


class HashEmbedder:
    """Words hashed into 384 signed dimensions, L2-normalised: a benchmark's stand-in for the embedding model."""

    name, dimension = "bench-hash-384", 384

    def embed(self, texts: list[str]) -> list[list[float]]:
        import hashlib

        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for k, text in enumerate(texts):
            for word in text.lower().split():
                h = int.from_bytes(hashlib.blake2b(word.strip(".,?").encode(), digest_size=8).digest(), "little")
                out[k, h % self.dimension] += 1.0 if (h >> 32) & 1 else -1.0
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out.tolist()


class HashEmbedderPlugin:
    __pps_name__ = "bench-hash-embedder"

    from pps_core import hookimpl

    @hookimpl
    def pps_embedder(self, memory):
        return HashEmbedder()


async def measure(store: str, home: Path, turns: int, runs: int, settings: dict, vectors: bool = False,
                  only_recall: bool = False) -> dict:
    rng = random.Random(7)
    out: dict = {}
    extra = [HashEmbedderPlugin()] if vectors else []
    async with Memory(load_settings("bench", home, plugins=[store, "crystals"], timezone="UTC", **settings),
                      extra_plugins=extra) as m:
        started = time.perf_counter()
        for k in range(0, turns, 1000):
            await m.call("store_messages", {"messages": [
                {"content": sentence(rng), "author_name": rng.choice(["Lyra", "Jeff"]),
                 "channel": rng.choice(["terminal:a", "discord:home", "email"]),
                 "created_at": f"2025-{1 + i * 12 // turns:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"}
                for i in range(k, min(turns, k + 1000))]})
        out["bulk turns/s"] = turns / (time.perf_counter() - started)
        if vectors:
            raw = m.require_layer("raw_capture")
            started = time.perf_counter()
            await raw.retriever.drain()
            out["vectors s"] = time.perf_counter() - started
            # the store's turn index made (what `pps reindex` does): SQLite's ANN, PostgreSQL's HNSW; turns are
            # captured meanwhile, timed as they go (a build that blocked writes would show here)
            started, during = time.perf_counter(), []
            build = asyncio.create_task(raw.retriever.reindex(lambda _d, _t: None, False))
            while not build.done():
                t0 = time.perf_counter()
                await m.call("store_message", {"content": sentence(rng), "author_name": "Jeff", "channel": "terminal:a"})
                during.append((time.perf_counter() - t0) * 1000)
                await asyncio.sleep(0.2)
            await build
            out["index s"] = time.perf_counter() - started
            out["turns stored during index"] = len(during)
            out["capture during index max ms"] = max(during, default=0.0)
        while True:  # summarize all but the newest 300, as bench/startup.py's entity is
            batch = await m.call("summarize_messages", {"limit": 1000})
            keep = batch["unsummarized_count"] - 300
            if keep <= 0 or not batch["message_ids"]:
                break
            await m.call("store_summary", {"summary_text": f"summary {batch['start_id']}",
                                           "message_ids": batch["message_ids"][:keep]})
        for name, op, params in [
                ("ambient_recall startup", "ambient_recall", lambda i: {"context": "startup"}),
                ("ambient_recall search", "ambient_recall", lambda i: {"context": QUERIES[i % len(QUERIES)]}),
                ("raw_search", "raw_search", lambda i: {"query": QUERIES[i % len(QUERIES)], "limit": 10})]:
            await m.call(op, params(0))  # warm
            lat = []
            for i in range(runs):
                t0 = time.perf_counter()
                await m.call(op, params(i))
                lat.append((time.perf_counter() - t0) * 1000)
            out[name] = (pct(lat, 50), pct(lat, 95))
        if only_recall:
            return out
        started = time.perf_counter()
        for _i in range(300):
            await m.call("store_message", {"content": sentence(rng), "author_name": "Jeff", "channel": "terminal:a"})
        out["store_message turns/s"] = 300 / (time.perf_counter() - started)

        async def writer(k: int) -> None:
            for _i in range(50):
                await m.call("store_message", {"content": sentence(rng), "author_name": "Jeff",
                                               "channel": f"terminal:{k}"})

        started = time.perf_counter()
        await asyncio.gather(*(writer(k) for k in range(8)))
        out["store_message x8 turns/s"] = 400 / (time.perf_counter() - started)
    return out


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--vectors", action="store_true", help="a vector per turn (hashing embedder): fused search")
    ap.add_argument("--only-recall", action="store_true", help="no capture-throughput measures")
    args = ap.parse_args()
    from pps_postgres.testing import start_postgres

    dsn, stop = start_postgres()
    try:
        with tempfile.TemporaryDirectory(prefix="pps-pgbench-") as tmp:
            sq = await measure("sqlite", Path(tmp) / "sqlite", args.turns, args.runs, {}, args.vectors,
                               args.only_recall)
            pg = await measure("postgres", Path(tmp) / "pg", args.turns, args.runs,
                               {"postgres": {"dsn": dsn, "schema": "bench"}}, args.vectors, args.only_recall)
    finally:
        stop()
    print(f"{args.turns} turns, {args.runs} runs each; PostgreSQL 16 (pgserver) on this machine, "
          "synchronous_commit on\n")
    print(f"{'measure':<28} {'sqlite p50':>10} {'p95':>8} {'postgres p50':>13} {'p95':>8} {'p95 ratio':>9}")
    for name in ("ambient_recall startup", "ambient_recall search", "raw_search"):
        (a50, a95), (b50, b95) = sq[name], pg[name]
        print(f"{name:<28} {a50:>10.1f} {a95:>8.1f} {b50:>13.1f} {b95:>8.1f} {b95 / a95:>9.1f}")
    for name in ("bulk turns/s", "store_message turns/s", "store_message x8 turns/s"):
        if name in sq:
            print(f"{name:<28} {sq[name]:>10.0f} {'':>8} {pg[name]:>13.0f} {'':>8} {pg[name] / sq[name]:>9.2f}")
    for name in ("vectors s", "index s", "turns stored during index", "capture during index max ms"):
        if name in pg:
            print(f"{name:<28} {sq.get(name, float('nan')):>10.1f} {'':>8} {pg[name]:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

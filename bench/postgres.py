"""The PostgreSQL store beside SQLite, same run: recall latency at 20,000 turns and capture throughput.

    .venv/bin/python bench/postgres.py [--turns 20000] [--runs 100] [--vectors] [--only-recall] [--keep DIR]

``--vectors``: every turn also gets a vector from a hashing embedder (words hashed into 384 dimensions, a
benchmark stand-in for the model: cheap, deterministic, topical enough), so ``raw_search`` is the fused search
(lexical + dense, with the per-channel second pass: three channels, each past 20,000 turns at 200,000) and the
turn index is made before measuring (`pps reindex`'s step: SQLite's ANN, PostgreSQL's HNSW), timed, with turns
captured meanwhile.
``--only-recall``: no capture-throughput measures (a long run at 200,000 turns).
``--keep DIR``: the two entities and the PostgreSQL server's data are built in DIR once (20 minutes at 200,000 turns
with vectors) and measured again by later runs with the same ``--turns``/``--vectors`` (the build's own measures
are those recorded when it was built).

The recall measures are taken with both entities open in one process, each call made on SQLite then on
PostgreSQL, run after run, so the load of the rest of the machine weighs on both alike.

The same Zipfian corpus as bench/startup.py is stored through store_messages into an entity on each store
(plugins sqlite+crystals, then postgres+crystals; PostgreSQL is a pgserver in a temp dir on this machine),
the oldest summarized until 300 stay unsummarized, then: ambient_recall("startup"), a non-startup ambient_recall (lexical layers), raw_search, each p50/p95
over ``--runs`` calls; capture through store_message one turn at a time (turns/s), and by 8 concurrent writers (400 turns). SQLite is the
baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
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


def settings_for(store: str, home: Path, dsn: str):
    extra = {"postgres": {"dsn": dsn, "schema": "bench", "auto_upgrade": True}} if store == "postgres" else {}
    return load_settings("bench", home, plugins=[store, "crystals"], timezone="UTC", **extra)


async def build(store: str, home: Path, dsn: str, turns: int, vectors: bool) -> dict:
    """The entity: ``turns`` turns stored in batches, (``vectors``) embedded and indexed with turns captured
    meanwhile, all but the newest 300 summarized. Returns the build's own measures."""
    rng = random.Random(7)
    out: dict = {}
    extra = [HashEmbedderPlugin()] if vectors else []
    async with Memory(settings_for(store, home, dsn), extra_plugins=extra) as m:
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
            task = asyncio.create_task(raw.retriever.reindex(lambda _d, _t: None, False))
            while not task.done():
                t0 = time.perf_counter()
                await m.call("store_message", {"content": sentence(rng), "author_name": "Jeff", "channel": "terminal:a"})
                during.append((time.perf_counter() - t0) * 1000)
                await asyncio.sleep(0.2)
            await task
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
    return out


MEASURES = [("ambient_recall startup", "ambient_recall", lambda i: {"context": "startup"}),
            ("ambient_recall search", "ambient_recall", lambda i: {"context": QUERIES[i % len(QUERIES)]}),
            ("raw_search", "raw_search", lambda i: {"query": QUERIES[i % len(QUERIES)], "limit": 10})]


async def recall(homes: dict[str, Path], dsn: str, runs: int, vectors: bool) -> dict[str, dict]:
    """Both entities open in this process, each call made on one store then the other, run after run: whatever
    else the machine does weighs on both alike."""
    extra = [HashEmbedderPlugin()] if vectors else []
    out: dict[str, dict] = {store: {} for store in homes}
    async with contextlib.AsyncExitStack() as stack:
        mems = {store: await stack.enter_async_context(Memory(settings_for(store, home, dsn), extra_plugins=extra))
                for store, home in homes.items()}
        for name, op, params in MEASURES:
            lat: dict[str, list[float]] = {store: [] for store in mems}
            for m in mems.values():
                await m.call(op, params(0))  # warm
            for i in range(runs):
                for store, m in mems.items():
                    t0 = time.perf_counter()
                    await m.call(op, params(i))
                    lat[store].append((time.perf_counter() - t0) * 1000)
            for store in mems:
                out[store][name] = (pct(lat[store], 50), pct(lat[store], 95))
    return out


async def capture(store: str, home: Path, dsn: str) -> dict:
    """Capture through store_message one turn at a time, then by 8 concurrent writers."""
    rng = random.Random(11)
    out: dict = {}
    async with Memory(settings_for(store, home, dsn)) as m:
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


def keep_server(keep: Path):
    """A pgserver whose data directory is ``keep``/pgdata, left running for the next run (``--keep``)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        keep.mkdir(parents=True, exist_ok=True)
        os.chmod(keep, 0o777)  # as root, pgserver runs the server as an unprivileged user
        server = pgserver.get_server(keep / "pgdata", cleanup_mode=None)
    return server.get_uri(), lambda: None


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--vectors", action="store_true", help="a vector per turn (hashing embedder): fused search")
    ap.add_argument("--only-recall", action="store_true", help="no capture-throughput measures")
    ap.add_argument("--keep", type=Path, help="build both entities (and the PostgreSQL server's data) here once, "
                                              "and measure them again in later runs without building")
    args = ap.parse_args()
    from pps_postgres.testing import start_postgres

    dsn, stop = keep_server(args.keep) if args.keep else start_postgres()
    try:
        with tempfile.TemporaryDirectory(prefix="pps-pgbench-") as tmp:
            base = args.keep or Path(tmp)
            homes = {"sqlite": base / "sqlite", "postgres": base / "pg"}
            built_file = base / f"built-{args.turns}-{int(args.vectors)}.json"
            if built_file.exists():
                built = json.loads(built_file.read_text())
                print(f"entities built earlier ({built_file}): build measures as recorded then")
            else:
                built = {store: await build(store, home, dsn, args.turns, args.vectors) for store, home in homes.items()}
                if args.keep:
                    built_file.write_text(json.dumps(built))
            measured = await recall(homes, dsn, args.runs, args.vectors)
            if not args.only_recall:
                for store, home in homes.items():
                    measured[store].update(await capture(store, home, dsn))
    finally:
        stop()
    sq = {**built["sqlite"], **measured["sqlite"]}
    pg = {**built["postgres"], **measured["postgres"]}
    print(f"{args.turns} turns, {args.runs} runs each, the two stores' calls alternating in one process; "
          "PostgreSQL 16 (pgserver) on this machine, synchronous_commit on\n")
    print(f"{'measure':<28} {'sqlite p50':>10} {'p95':>8} {'postgres p50':>13} {'p95':>8} {'p50 ratio':>9} "
          f"{'p95 ratio':>9}")
    for name, _op, _params in MEASURES:
        (a50, a95), (b50, b95) = sq[name], pg[name]
        print(f"{name:<28} {a50:>10.1f} {a95:>8.1f} {b50:>13.1f} {b95:>8.1f} {b50 / a50:>9.1f} {b95 / a95:>9.1f}")
    for name in ("bulk turns/s", "store_message turns/s", "store_message x8 turns/s"):
        if name in sq:
            print(f"{name:<28} {sq[name]:>10.0f} {'':>8} {pg[name]:>13.0f} {'':>8} {pg[name] / sq[name]:>9.2f}")
    for name in ("vectors s", "index s", "turns stored during index", "capture during index max ms"):
        if name in pg:
            print(f"{name:<28} {sq.get(name, float('nan')):>10.1f} {'':>8} {pg[name]:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

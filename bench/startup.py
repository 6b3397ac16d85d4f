"""Spine benchmark: ambient_recall latency at 20,000 turns and capture throughput.

    .venv/bin/python bench/startup.py [--turns 20000] [--unsummarized 300] [--crystals 40] [--runs 200]

Prints p50/p95 of ambient_recall("startup") and of a non-startup recall over the lexical layers
(sqlite + crystals), and capture throughput through the real operation, each beside a baseline
measured in the same run: plain SQL doing the least the same answer needs.
Targets (issue 2): startup p95 < 50 ms, non-startup p95 < 50 ms, capture >= 2,000 turns/s.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core import Memory  # noqa: E402
from pps_core.settings import load_settings  # noqa: E402

WORDS = ("garden kitchen light cedar electrician coffee memory server startup manifest graph river channel "
         "summary crystal lighthouse kitten garden morning evening plan sketch build test ship rest dream "
         "walk talk read write think feel remember forget window door lamp book music rain sun").split()
QUERIES = ["what did we decide about the garden beds?", "when is the electrician coming", "coffee in the morning",
           "the lighthouse keeper story", "startup manifest counts", "music and rain at night"]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


SYLLABLES = "ka lo mi ne ru sa te vi zo pa re do fi gu ha ji ko lu ma".split()
VOCAB = WORDS + sorted({a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES})[:4000]
ZIPF = [1 / (rank + 1) for rank in range(len(VOCAB))]  # word frequencies of real text are roughly Zipfian


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(VOCAB, weights=ZIPF, k=rng.randint(8, 40))).capitalize() + "."


async def build(home: Path, turns: int, unsummarized: int, crystals: int) -> Memory:
    rng = random.Random(7)
    memory = Memory(load_settings("bench", home, plugins=["sqlite", "crystals"], timezone="UTC"))
    await memory.open()
    batch = []
    for i in range(turns):
        batch.append({"content": sentence(rng), "author_name": rng.choice(["Lyra", "Jeff"]),
                      "channel": rng.choice(["terminal:a", "discord:home", "email"]),
                      "created_at": f"2025-{1 + i * 12 // turns:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"})
        if len(batch) == 1000:
            await memory.call("store_messages", {"messages": batch})
            batch = []
    if batch:
        await memory.call("store_messages", {"messages": batch})
    for start in range(1, turns - unsummarized + 1, 50):
        end = min(start + 49, turns - unsummarized)
        await memory.call("store_summary", {"summary_text": sentence(rng) * 3, "start_id": start, "end_id": end})
    for i in range(crystals):
        await memory.call("crystallize", {"content": f"Crystal {i}: " + sentence(rng) * 5})
    return memory


async def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def baseline_startup(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("SELECT * FROM messages WHERE summary_id IS NULL ORDER BY id").fetchall()
    conn.execute("SELECT * FROM message_summaries ORDER BY id DESC LIMIT 2").fetchall()
    conn.close()


def baseline_search(db: Path, q: str) -> None:
    conn = sqlite3.connect(db)
    terms = " OR ".join(f'"{w}"' for w in q.replace("?", "").split() if len(w) > 3)
    conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT 5", (terms,)).fetchall()
    conn.close()


async def capture_rate(home: Path, texts: list[str], plugins: list[str]) -> tuple[float, Path]:
    async with Memory(load_settings("cap", home, plugins=plugins, timezone="UTC")) as memory:
        t0 = time.perf_counter()
        for t in texts:
            await memory.call("store_message", {"content": t, "author_name": "Lyra", "channel": "terminal"})
        return len(texts) / (time.perf_counter() - t0), memory.layer("raw_capture").backend.db.path


async def capture(home: Path, n: int) -> tuple[float, float, float | None]:
    rng = random.Random(3)
    texts = [sentence(rng) for _ in range(n)]
    ours, db = await capture_rate(home, texts, ["sqlite"])
    from pps_core.plugins import installed_plugins

    with_embedder = None
    if "embeddings" in installed_plugins():  # vectors are computed after the turn is acknowledged
        with_embedder, _ = await capture_rate(home.parent / "cap-emb", texts, ["sqlite", "embeddings"])
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    t0 = time.perf_counter()
    for t in texts:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO messages (content, author_name, channel, created_at) VALUES (?, 'Lyra', 'terminal', "
                     "strftime('%Y-%m-%dT%H:%M:%fZ','now'))", (t,))
        conn.execute("COMMIT")
    base = n / (time.perf_counter() - t0)
    conn.close()
    return ours, base, with_embedder


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--unsummarized", type=int, default=300)
    ap.add_argument("--crystals", type=int, default=40)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--capture", type=int, default=5_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        memory = await build(Path(tmp) / "bench", args.turns, args.unsummarized, args.crystals)
        print(f"built {args.turns} turns ({args.unsummarized} unsummarized), {args.crystals} crystals "
              f"in {time.perf_counter() - t0:.1f}s")
        db = memory.layer("raw_capture").backend.db.path
        startup = await timed(lambda: memory.call("ambient_recall", {"context": "startup"}), args.runs)
        qi = iter(QUERIES * args.runs)
        search = await timed(lambda: memory.call("ambient_recall", {"context": next(qi)}), args.runs)
        base_start = await timed(lambda: asyncio.to_thread(baseline_startup, db), args.runs)
        qj = iter(QUERIES * args.runs)
        base_search = await timed(lambda: asyncio.to_thread(baseline_search, db, next(qj)), args.runs)
        size = len((await memory.call("ambient_recall", {"context": "startup"}))["text"])
        await memory.close()
        ours, base, with_embedder = await capture(Path(tmp) / "cap", args.capture)

    print(f"\n{'measure':<38}{'p50 ms':>9}{'p95 ms':>9}{'baseline p50':>14}{'ratio':>8}{'target':>12}")
    for name, vals, basev, target in [("ambient_recall startup", startup, base_start, "p95 < 50"),
                                      ("ambient_recall search (lexical)", search, base_search, "p95 < 50")]:
        print(f"{name:<38}{pct(vals, 50):>9.2f}{pct(vals, 95):>9.2f}{pct(basev, 50):>14.2f}"
              f"{pct(vals, 50) / pct(basev, 50):>8.1f}{target:>12}")
    print(f"{'capture, one writer (turns/s)':<38}{ours:>9.0f}{'':>9}{base:>14.0f}{ours / base:>8.2f}{'>= 2000':>12}")
    if with_embedder is not None:
        print(f"{'capture, embedder loaded (turns/s)':<38}{with_embedder:>9.0f}{'':>9}{base:>14.0f}"
              f"{with_embedder / base:>8.2f}{'>= 2000':>12}")
    print(f"\nstartup package: {size} chars; baseline = plain SQL of the same rows (no rendering); "
          f"capture baseline = bare INSERT per transaction")


if __name__ == "__main__":
    asyncio.run(main())

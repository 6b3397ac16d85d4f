"""Memory explorer benchmark: p95 per page, server side, at 20,000 turns and 2,000 graph facts.

    .venv/bin/python bench/explorer.py [--turns 20000] [--facts 2000] [--runs 50]

The entity loads every default layer and the explorer; the HTTP app (create_app, the same one
`pps serve http` runs) answers in-process through ASGI, so the time is the server's: routing, the
login gate, the operations the page is built from, template rendering and escaping, no socket.
Each page is printed beside its baseline, measured in the same run: the bare operation call
(``memory.call``) the page is mainly built from. Target (issue 16): every page p95 < 150 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph import populate_graph  # noqa: E402
from startup import pct, sentence  # noqa: E402

from pps_core import Memory  # noqa: E402
from pps_core.settings import load_settings  # noqa: E402

PLUGINS = ["sqlite", "crystals", "chroma", "embeddings", "graphiti", "http", "explorer"]
DAYS = 60
START = datetime(2026, 1, 1, tzinfo=UTC)
CHANNELS = ["terminal:a1b2", "terminal:c3d4", "discord:home", "discord:work", "email", "reflection"]
QUERIES = ["garden kitchen light", "when is the electrician coming", "coffee in the morning", "lighthouse river"]


async def seed(memory: Memory, turns: int, facts: int, unsummarized: int) -> None:
    rng = random.Random(16)
    started = time.perf_counter()
    ids: list[int] = []
    batch = []
    for i in range(turns):
        minute = i * DAYS * 24 * 60 // turns
        batch.append({"content": sentence(rng), "author_name": rng.choice(["Lyra", "Jeff", "Brandi"]),
                      "channel": rng.choice(CHANNELS),
                      "created_at": (START + timedelta(minutes=minute)).isoformat()})
        if len(batch) == 1000:
            ids += (await memory.call("store_messages", {"messages": batch}))["ids"]
            batch = []
    if batch:
        ids += (await memory.call("store_messages", {"messages": batch}))["ids"]
    done = ids[: max(0, len(ids) - unsummarized)]
    for i in range(0, len(done), 100):
        await memory.call("store_summary", {"summary_text": sentence(rng) + " " + sentence(rng),
                                            "message_ids": done[i:i + 100]})
    for i in range(30):
        await memory.call("anchor_save", {"title": f"photo {i}", "content": " ".join(sentence(rng) for _ in range(6))})
    for i in range(6):
        await memory.call("crystallize", {"content": f"Crystal {i}: {sentence(rng)}"})
    write_s = await populate_graph(memory, 500, facts, rng)
    print(f"seeded {turns} turns ({unsummarized} unsummarized, {len(done) // 100} summaries), 30 word-photos, "
          f"6 crystals, {facts} facts in {time.perf_counter() - started:.0f} s (graph {write_s:.0f} s)", flush=True)


def pages(focal: str) -> list[tuple[str, str, str, dict]]:
    """(label, path, baseline operation, its params); {i} in a path rotates through days/queries."""
    return [
        ("home", "/", "pps_health", {}),
        ("startup package", "/startup", "ambient_recall", {"context": "startup"}),
        ("timeline (one day)", "/timeline?day=2026-02-{day}", "list_turns",
         {"since": "2026-02-{day}", "until": "2026-02-{next}", "limit": 50}),
        ("timeline, channel filter", "/timeline?day=2026-02-{day}&channel=discord", "list_turns",
         {"since": "2026-02-{day}", "until": "2026-02-{next}", "limit": 50, "channel": "discord"}),
        ("timeline search", "/timeline?q={q}", "raw_search", {"query": "{q}", "limit": 20}),
        ("around a moment", "/around?ts=2026-02-{day}T12:00:00Z", "get_turns_around",
         {"timestamp": "2026-02-{day}T12:00:00Z", "count": 40}),
        ("summaries", "/summaries?offset=40", "get_recent_summaries", {"limit": 20, "offset": 40}),
        ("crystals", "/crystals", "get_crystals", {"count": 4}),
        ("word-photos", "/photos", "anchor_list", {"limit": 50}),
        ("a word-photo", "/photos/photo-7.md", "anchor_get", {"filename": "photo-7.md"}),
        ("graph (focal, 1 hop)", "/graph", "texture_explore", {"entity_name": focal, "depth": 1, "limit": 60}),
        ("graph fact search", "/graph?q={q}", "texture_search", {"query": "{q}", "limit": 20, "node_limit": 0}),
        ("plots (30 days)", "/plots", "turn_activity", {"days": 30}),
    ]


def fill(value, i: int):
    day = 1 + i % 27
    subs = {"{day}": f"{day:02d}", "{next}": f"{day + 1:02d}", "{q}": QUERIES[i % len(QUERIES)]}
    if isinstance(value, dict):
        return {k: fill(v, i) for k, v in value.items()}
    if isinstance(value, str):
        for k, v in subs.items():
            value = value.replace(k, v)
    return value


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--facts", type=int, default=2_000)
    ap.add_argument("--unsummarized", type=int, default=300)
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()

    import httpx
    from pps_http.app import create_app

    with tempfile.TemporaryDirectory(prefix="pps-bench-explorer-") as tmp:
        home = Path(tmp) / "bench"
        home.mkdir()
        (home / "token").write_text("bench-token\n")
        memory = Memory(load_settings("bench", home, plugins=PLUGINS, timezone="UTC", graphiti={"focal_entity": "Lyra"}))
        await memory.open()
        try:
            await seed(memory, args.turns, args.facts, args.unsummarized)
            app = create_app([memory])
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                             headers={"Authorization": "Bearer bench-token"}) as client:
                    await run(client, memory, args.runs)
        finally:
            await memory.close()


async def run(client, memory: Memory, runs: int) -> None:
    print(f"{'page':<28}{'p50 ms':>9}{'p95 ms':>9}   {'baseline (bare operation)':<28}{'p95 ms':>8}{'ratio':>8}")
    worst = 0.0
    for label, path, op, params in pages("Lyra"):
        for i in range(3):  # warm up: first embeddings, template compilation
            await client.get(f"/ui/bench{fill(path, i)}")
            await memory.call(op, fill(params, i))
        page_ms, base_ms = [], []
        for i in range(runs):
            t = time.perf_counter()
            r = await client.get(f"/ui/bench{fill(path, i)}")
            page_ms.append((time.perf_counter() - t) * 1000)
            if r.status_code != 200 or 'class="notice"' in r.text:
                raise SystemExit(f"{label}: {r.status_code} {r.text[:600]}")
            t = time.perf_counter()
            await memory.call(op, fill(params, i))
            base_ms.append((time.perf_counter() - t) * 1000)
        p95, b95 = pct(page_ms, 95), pct(base_ms, 95)
        worst = max(worst, p95)
        print(f"{label:<28}{pct(page_ms, 50):9.1f}{p95:9.1f}   {op:<28}{b95:8.1f}{p95 / max(b95, 0.01):8.1f}",
              flush=True)
    print(f"\nslowest page p95: {worst:.1f} ms (target < 150 ms: {'met' if worst < 150 else 'NOT met'})")


if __name__ == "__main__":
    asyncio.run(main())

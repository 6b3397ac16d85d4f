"""Transport overhead: the same operations in-process, over REST and over MCP-over-HTTP, on loopback.

    .venv/bin/python bench/transport.py [--n 200] [--turns 50,300]

One fresh entity per size (plugins sqlite + crystals, in a temp root) is seeded through the real operations
with that many unsummarized turns and 4 crystals: 50 is the backlog upkeep keeps (the startup package is
then ~20 KB), 300 a neglected one (~110 KB, every turn goes into the package). One ``pps serve http``
hosts them all. Then each operation is timed N times (after a warm-up) three ways, interleaved round by
round so that other load on the machine falls on every path alike: ``memory.call`` in this process (a
non-owning Memory on the same stores); ``POST /tools/<op>`` to a real ``pps serve http`` subprocess (httpx,
keep-alive); and ``tools/call`` through the MCP SDK client over streamable HTTP to ``/mcp`` of that server.
Baselines in the same run: ``GET /tools`` (the HTTP floor: auth, no operation) and the original
system's published ambient_recall latency (3.3 s untuned, 1.2 s tuned; DESIGN.md §7).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from pps_core.testing.server import init_entity, start_server

OPS = [("ambient_recall", {"context": "startup"}), ("raw_search", {"query": "lighthouse door", "limit": 10})]


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(fn, n: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        await fn()
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


async def seed(root: Path, entity: str, turns: int) -> None:
    from pps_core import Memory

    async with Memory.for_entity(entity, home=root / entity) as memory:
        words = ["lighthouse", "door", "kitten", "tax", "river", "garden", "cobalt", "morning"]
        batch = [{"content": f"turn {i}: the {words[i % 8]} and the {words[(i * 3) % 8]} again",
                  "author_name": "Jeff" if i % 2 else "Lyra", "channel": f"terminal:{i % 3}"} for i in range(turns)]
        await memory.call("store_messages", {"messages": batch})
        for i in range(4):
            await memory.call("crystallize", {"content": f"crystal {i}: what the lighthouse taught us " * 20})


async def time_all(root: Path, entity: str, url: str, n: int, warmup: int = 20) -> dict[str, list[float]]:
    """Interleaved: each round runs every path once, so load from elsewhere hits all paths alike."""
    import httpx
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from pps_core import Memory

    headers = {"Authorization": f"Bearer {(root / entity / 'token').read_text().strip()}"}
    url = f"{url}/entities/{entity}"
    out: dict[str, list[float]] = {}

    async def clock(key: str, fn, keep: bool) -> None:
        started = time.perf_counter()
        await fn()
        if keep:
            out.setdefault(key, []).append((time.perf_counter() - started) * 1000)

    # own=False: the server owns the stores; this process only reads them (SQLite WAL, crystal files).
    async with Memory.for_entity(entity, home=root / entity, own=False) as memory, \
            httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as http, \
            Client(streamable_http_client(f"{url}/mcp", http_client=httpx2.AsyncClient(headers=headers,
                                                                                        timeout=10))) as mcp:
        await mcp.list_tools()

        async def health():
            (await http.get("/tools")).raise_for_status()

        for i in range(warmup + n):
            keep = i >= warmup
            await clock("floor: GET /tools", health, keep)
            for op, params in OPS:
                async def local(op=op, params=params):
                    await memory.call(op, params)

                async def post(op=op, params=params, keep=keep):
                    answer = await http.post(f"/tools/{op}", json=params)
                    answer.raise_for_status()
                    if keep:  # the server's own time for the operation (Server-Timing: op;dur=...)
                        took = float(answer.headers["server-timing"].split("dur=")[1])
                        out.setdefault(f"server-side {op}", []).append(took)

                async def call(op=op, params=params):
                    result = await mcp.call_tool(op, params)
                    assert not result.is_error, result.content

                paths = [(f"in-process {op}", local), (f"http {op}", post), (f"mcp {op}", call)]
                for key, fn in paths[i % 3:] + paths[:i % 3]:
                    await clock(key, fn, keep)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--turns", default="50,300", help="comma-separated sizes, one entity each")
    args = parser.parse_args()
    sizes = [int(t) for t in args.turns.split(",")]
    entities = [f"bench{t}" for t in sizes]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for entity, turns in zip(entities, sizes, strict=True):
            init_entity(root, entity, "sqlite,crystals,mcp,http")
            asyncio.run(seed(root, entity, turns))
        server = start_server(root, "--entity", entities[0], "--entities", ",".join(entities))
        try:
            for entity in entities:
                results[entity] = asyncio.run(time_all(root, entity, server.url, args.n))
        finally:
            server.stop()
    worst = 0.0
    for entity, turns in zip(entities, sizes, strict=True):
        times = results[entity]
        print(f"\n{turns} unsummarized turns + 4 crystals; loopback; n={args.n} per row, interleaved")
        print(f"{'path':<40} {'p50 ms':>8} {'p95 ms':>8} {'p50 over in-process':>20}")
        rows = [(f"in-process {op}", times[f"in-process {op}"], None) for op, _ in OPS]
        rows += [(f"in server (Server-Timing) {op}", times[f"server-side {op}"], None) for op, _ in OPS]
        rows.append(("floor: GET /tools", times["floor: GET /tools"], None))
        for kind in ("http", "mcp"):
            rows += [(f"{kind} {op}", times[f"{kind} {op}"], statistics.median(times[f"in-process {op}"]))
                     for op, _ in OPS]
        for name, samples, base in rows:
            over = "" if base is None else f"{statistics.median(samples) - base:+.2f}"
            if base is not None and turns == sizes[0]:
                worst = max(worst, statistics.median(samples) - base)
            print(f"{name:<40} {pct(samples, .5):>8.2f} {pct(samples, .95):>8.2f} {over:>20}")
    print("\nbaseline (original system, DESIGN.md §7): ambient_recall 3300 ms untuned, 1200 ms tuned")
    print(f"largest p50 overhead over in-process at {sizes[0]} turns: {worst:.2f} ms (target < 5 ms): "
          f"{'PASS' if worst < 5 else 'FAIL'}")


if __name__ == "__main__":
    main()

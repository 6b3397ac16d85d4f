"""Many channels, one entity: ambient_recall with a budget and unread-from-other-channels on.

    .venv/bin/python bench/channels.py [--turns 20000] [--channels 6] [--runs 200] [--budget 9000]

Six channels write into one entity (20,000 turns, 300 unsummarized); each channel's reader asks for
recall with its consumer_key, its channel and a 9,000-character budget (Claude Code's hook limit is
about 10,000), while the other channels keep writing between calls so there is always something unread.
Prints p50/p95 beside the same recall without budget and unread (the baseline, same run).
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

from startup import QUERIES, build, pct, sentence  # noqa: E402

CHANNELS = ["terminal:a", "terminal:b", "discord:home", "discord:work", "email:inbox", "daemon:reflection"]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--channels", type=int, default=6)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--budget", type=int, default=9_000)
    args = ap.parse_args()
    channels = CHANNELS[: args.channels]
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        memory = await build(Path(tmp) / "ch", args.turns, 300, 40)
        for c in channels:  # register each reader (a new consumer starts at now)
            await memory.call("poll_channels", {"consumer_key": f"reader-{c}", "channel": c})

        async def one(budgeted: bool, i: int) -> float:
            c = channels[i % len(channels)]
            writer = channels[(i + 1) % len(channels)]
            await memory.call("store_message", {"content": sentence(rng), "author_name": "bench", "channel": writer})
            params = {"context": "startup" if i % 2 == 0 else QUERIES[i % len(QUERIES)]}
            if budgeted:
                params.update(budget=args.budget, consumer_key=f"reader-{c}", channel=c)
            t0 = time.perf_counter()
            out = await memory.call("ambient_recall", params)
            ms = (time.perf_counter() - t0) * 1000
            if budgeted:
                assert len(out["text"]) <= args.budget
            return ms

        ours = [await one(True, i) for i in range(args.runs)]
        base = [await one(False, i) for i in range(args.runs)]
        await memory.close()
    print(f"\n{args.channels} channels, {args.turns} turns, budget {args.budget}, {args.runs} calls each "
          "(half startup, half search)")
    print(f"{'measure':<44}{'p50 ms':>9}{'p95 ms':>9}")
    print(f"{'ambient_recall, budget + unread + channel':<44}{pct(ours, 50):>9.2f}{pct(ours, 95):>9.2f}")
    print(f"{'baseline: same calls, no budget, no unread':<44}{pct(base, 50):>9.2f}{pct(base, 95):>9.2f}")
    print(f"ratio p95: {pct(ours, 95) / pct(base, 95):.2f}")


if __name__ == "__main__":
    asyncio.run(main())

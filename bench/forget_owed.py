"""What recording the owed forget costs a forget (issue 35 item 2).

    .venv/bin/python bench/forget_owed.py [--turns 3000] [--single 40] [--batch 300] [--batches 3]

Two SQLite entities with the same turns, in the same run: one whose plugins declare a copy outside the turn store
(a no-op copy that confirms at once: the forget records the owed forget with the turns' texts in its transaction,
reads it back, and deletes it when the copy confirms), one that declares none (the baseline: no record, what a
forget cost before). Times ``forget_turns`` of one turn (``--single`` times) and of ``--batch`` turns
(``--batches`` times), taking turns in turn between the two entities so the machine's load falls on both alike.
Prints medians and the ratio with the copy over without.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core import Memory, TurnCopy, hookimpl  # noqa: E402

WORDS = ("harbor snow lamp pier coffee dawn kitten tide lighthouse rain window garden letter train bridge "
         "morning winter ember violin market river").split()


class Copy:
    """A copy that forgets at once (a cache with nothing to do): only the owed record's cost remains."""

    __pps_name__ = "benchcopy"

    @hookimpl
    def pps_turn_copies(self, memory):
        return [TurnCopy("cache", "nowhere", "nothing", lambda turns: None)]


async def fill(m: Memory, n: int, rng: random.Random) -> None:
    for k in range(0, n, 500):
        batch = [{"content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))), "author_name": "Ana",
                  "channel": "bench"} for _ in range(min(500, n - k))]
        await m.call("store_messages", {"messages": batch})


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=3000)
    ap.add_argument("--single", type=int, default=40)
    ap.add_argument("--batch", type=int, default=300)
    ap.add_argument("--batches", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        owed = Memory.for_entity("owed", home=Path(root) / "owed", plugins=["sqlite"], timezone="UTC",
                                 extra_plugins=[Copy()])
        bare = Memory.for_entity("bare", home=Path(root) / "bare", plugins=["sqlite"], timezone="UTC")
        async with owed, bare:
            for m in (owed, bare):
                await fill(m, args.turns, random.Random(3))
            assert owed.events.owed_copies() == ["benchcopy/cache"] and bare.events.owed_copies() == []
            times: dict[str, dict[str, list[float]]] = {"owed": {"one": [], "batch": []},
                                                        "bare": {"one": [], "batch": []}}
            next_id = 1

            async def forget(m: Memory, name: str, kind: str, ids: list[int]) -> None:
                t = time.perf_counter()
                out = await m.call("forget_turns", {"ids": ids})
                times[name][kind].append((time.perf_counter() - t) * 1000)
                assert out["count"] == len(ids) and out["pending"] == [], out

            for _ in range(args.single):
                for m, name in ((owed, "owed"), (bare, "bare")):
                    await forget(m, name, "one", [next_id])
                next_id += 1
            for _ in range(args.batches):
                ids = list(range(next_id, next_id + args.batch))
                for m, name in ((owed, "owed"), (bare, "bare")):
                    await forget(m, name, "batch", ids)
                next_id += args.batch
            assert (await owed.call("pps_health"))["owed_forgets"]["count"] == 0
    for kind, label in (("one", "forget_turns, 1 turn"), ("batch", f"forget_turns, {args.batch} turns")):
        a, b = statistics.median(times["owed"][kind]), statistics.median(times["bare"][kind])
        print(f"{label:<28} with a copy owed: median {a:7.1f} ms   without: {b:7.1f} ms   ratio {a / b:.2f}")


if __name__ == "__main__":
    asyncio.run(main())

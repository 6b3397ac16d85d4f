"""The capture filter with secret detection on vs off, over the public LoCoMo file (issue 41).

    .venv/bin/python bench/secrets.py [FILE] [--rounds N]

Every string of the file (turns, captions, questions, answers, summaries; keys included) goes through
``drop_private_deep`` with the entity's default detector (on) and with ``[privacy] secrets = false`` (off: the
``<private>`` filter alone), alternately, in the same run. Prints the redactions (target 0: each listed by kind and
where, never the value), the throughput of both and their ratio, and the cost per 1,000-character turn. Then
capture as a client sees it: the file's 2,760 turns stored by ``store_messages`` (batches of 500) into a fresh
SQLite entity with detection on and one with it off, alternately, same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402

from pps_core.privacy import (  # noqa: E402
    DEFAULT_SECRET_SCANNER,
    SecretScanner,
    drop_private_deep,
    reset_secret_scanner,
    use_secret_scanner,
)


def strings(value, path="$"):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}.<key>", k
            yield from strings(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from strings(v, f"{path}[{i}]")


def timed(data, scanner: SecretScanner) -> float:
    token = use_secret_scanner(scanner)
    try:
        started = time.perf_counter()
        drop_private_deep(data, strict=False)
        return time.perf_counter() - started
    finally:
        reset_secret_scanner(token)


async def capture(turns: list[dict], on: bool) -> float:
    from pps_core import Memory
    from pps_core.settings import load_settings

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings("bench", Path(tmp) / "bench", plugins=["sqlite"], timezone="UTC",
                                 privacy={"secrets": on})
        async with Memory(settings) as memory:
            started = time.perf_counter()
            for i in range(0, len(turns), 500):
                await memory.call("store_messages", {"messages": turns[i:i + 500]})
            return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=str(locomo.DEFAULT_FILE))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    texts = list(strings(data))
    chars = sum(len(t) for _, t in texts)
    found = [(where, kind) for where, text in texts for kind in DEFAULT_SECRET_SCANNER.find(text)]
    print(f"{len(texts)} strings, {chars} characters; redactions: {len(found)}")
    for where, kind in found:
        print(f"  [secret:{kind}] at {where}")
    off_scanner = SecretScanner.build(enabled=False)
    on, off = [], []
    for _ in range(args.rounds):  # alternated: load on the machine hits both alike
        off.append(timed(data, off_scanner))
        on.append(timed(data, DEFAULT_SECRET_SCANNER))
    best_on, best_off = min(on), min(off)
    print(f"{'filter':<28}{'MB/s':>8}{'strings/s':>12}")
    print(f"{'<private> only (off)':<28}{chars / best_off / 1e6:>8.1f}{len(texts) / best_off:>12.0f}")
    print(f"{'<private> + secrets (on)':<28}{chars / best_on / 1e6:>8.1f}{len(texts) / best_on:>12.0f}")
    print(f"throughput on/off: {best_off / best_on:.2f} ({best_on / best_off:.1f}x the time); "
          f"{(best_on - best_off) / chars * 1000 * 1e6:.1f} us more per 1,000-character turn")
    turns = [t for conv in locomo.load(Path(args.file)) for t in conv["turns"]]
    cap_on, cap_off = [], []
    for _ in range(min(args.rounds, 3)):
        cap_off.append(asyncio.run(capture(turns, False)))
        cap_on.append(asyncio.run(capture(turns, True)))
    on_s, off_s = min(cap_on), min(cap_off)
    print(f"capture, store_messages: off {len(turns) / off_s:.0f} turns/s, on {len(turns) / on_s:.0f} turns/s, "
          f"on/off {off_s / on_s:.2f}")
    return 0 if not found else 1


if __name__ == "__main__":
    raise SystemExit(main())

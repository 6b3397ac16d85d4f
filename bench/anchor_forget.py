"""What forgetting or editing a word-photo costs now that the index is written afresh (issue 22 item 8, issue 35
item 11).

    .venv/bin/python bench/anchor_forget.py [--photos 2000] [--deletes 5]

Saves ``--photos`` word-photos (local ONNX embedder, embedded Chroma), then times, in the same run on the same
index: ``anchor_delete(forget=true)`` (file gone, index rewritten: every remaining chunk and vector copied into a
new index, no re-embedding) against the baseline ``anchor_delete`` (kept under .deleted/, chunks removed: what
a forget cost before), and anchor_search right after, and the index folder's size; then ``anchor_edit`` (the file
rewritten, re-indexed, the index written afresh so the replaced text leaves it) against the baseline of the same
edit made by hand and re-indexed by ``anchor_resync`` (what anchor_edit cost before: no rewrite).
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

from pps_core import Memory  # noqa: E402

WORDS = ("harbor snow lamp pier coffee dawn kitten tide lighthouse rain window garden letter train bridge "
         "morning winter ember violin market river").split()


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=2000)
    ap.add_argument("--deletes", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(8)
    with tempfile.TemporaryDirectory() as home:
        async with Memory.for_entity("bench", home=home, plugins=["chroma", "embeddings"], timezone="UTC") as m:
            names = []
            started = time.perf_counter()
            for i in range(args.photos):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 160)))
                names.append((await m.call("anchor_save", {"content": text, "title": f"photo {i}"}))["saved"])
                if (i + 1) % 250 == 0:
                    print(f"  saved {i + 1}/{args.photos} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
            chunks = m.layer("core_anchors").index.count()
            size_before = folder_bytes(Path(home) / "chroma")
            picked = rng.sample(names, 2 * args.deletes)
            baseline, forget, search = [], [], []
            for name in picked[:args.deletes]:
                t = time.perf_counter()
                await m.call("anchor_delete", {"filename": name})
                baseline.append((time.perf_counter() - t) * 1000)
            for name in picked[args.deletes:]:
                t = time.perf_counter()
                await m.call("anchor_delete", {"filename": name, "forget": True})
                forget.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                await m.call("anchor_search", {"query": "harbor at dawn", "limit": 5})
                search.append((time.perf_counter() - t) * 1000)
            size_after = folder_bytes(Path(home) / "chroma")
            kept = [n for n in names if n not in picked]
            edits, by_hand = [], []
            layer = m.layer("core_anchors")
            for k, name in enumerate(rng.sample(kept, 2 * args.deletes)):
                text = " ".join(rng.choice(WORDS) for _ in range(80)) + f" edited {k}"
                t = time.perf_counter()
                if k % 2:
                    await m.call("anchor_edit", {"filename": name, "content": text})
                    edits.append((time.perf_counter() - t) * 1000)
                else:
                    path = layer.dir / name
                    path.write_text(path.read_text().split("\n---\n", 1)[0] + "\n---\n\n" + text + "\n")
                    await m.call("anchor_resync", {})
                    by_hand.append((time.perf_counter() - t) * 1000)
    med = statistics.median
    print(f"index: {args.photos} word-photos, {chunks} chunks; {args.deletes} deletes each")
    print(f"anchor_delete(forget=true), rewrite  median {med(forget):8.1f} ms   max {max(forget):8.1f} ms")
    print(f"baseline: anchor_delete (to trash)   median {med(baseline):8.1f} ms   max {max(baseline):8.1f} ms"
          f"   ratio {med(forget) / med(baseline):.0f}x")
    print(f"anchor_search right after a forget   median {med(search):8.1f} ms")
    print(f"index folder: {size_before / 1e6:.1f} MB before, {size_after / 1e6:.1f} MB after the forgets")
    print(f"anchor_edit, rewrite                 median {med(edits):8.1f} ms   max {max(edits):8.1f} ms")
    print(f"baseline: edit by hand + resync      median {med(by_hand):8.1f} ms   max {max(by_hand):8.1f} ms"
          f"   ratio {med(edits) / med(by_hand):.0f}x")


if __name__ == "__main__":
    asyncio.run(main())

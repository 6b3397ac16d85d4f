"""The startup package of an entity, frozen for a byte-for-byte comparison between two versions of the code.

    .venv/bin/python bench/startup_snapshot.py HOME OUT.json [--plugins sqlite,embeddings,chroma,crystals]

Opens the entity at HOME (as bench/lifetime.py opens its cached ones: ``HOME/home``, zone UTC), calls
``ambient_recall`` 30 times to warm it (a copied entity's first calls sync its word-photo index), then writes the
whole result of ``startup``, ``startup`` with budget 9,000 and with budget 3,000 (text and JSON) with the clock
fixed and every ``latency_ms`` zeroed. Run it with each version (e.g. main's tree on ``PYTHONPATH``) and ``cmp``
the files: issue 26 changed how the package is built, never what it says.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core import Memory  # noqa: E402
from pps_core.builtin import recall  # noqa: E402

FIXED = datetime(2026, 11, 24, 23, 30, 5, tzinfo=UTC)
CALLS = {"startup": {"context": "startup"}, "budget_9000": {"context": "startup", "budget": 9000},
         "budget_3000": {"context": "startup", "budget": 3000}}


def frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (0 if k == "latency_ms" else frozen(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [frozen(v) for v in value]
    return value


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("home", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--plugins", default="sqlite,embeddings,chroma,crystals")
    args = ap.parse_args()
    memory = Memory.for_entity("lifetime", home=args.home / "home", plugins=args.plugins.split(","), timezone="UTC")
    await memory.open()
    try:
        for _ in range(30):
            await memory.call("ambient_recall", {"context": "startup"})
        recall.now_utc = lambda: FIXED  # type: ignore[assignment]
        out = {name: frozen(await memory.call("ambient_recall", params)) for name, params in CALLS.items()}
    finally:
        await memory.close()
    args.out.write_text(json.dumps(out, ensure_ascii=False))
    print(f"{args.out}: " + ", ".join(f"{k} {len(v['text']):,} chars, {len(v['results'])} results"
                                      for k, v in out.items()))


if __name__ == "__main__":
    asyncio.run(main())

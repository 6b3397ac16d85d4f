"""`pps demo`: a fresh entity on the embedded defaults, a short conversation, then what it remembers.

Run: pps demo [--home DIR]   (default: ./.demo/lyra, recreated each run)
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
from pathlib import Path
from typing import Any

from pps_core import Memory
from pps_core.plugins import default_plugins
from pps_core.settings import load_settings

CONVERSATION = [
    ("Jeff", "terminal:demo", "2026-01-26T09:02:00", "Morning, Lyra. Did the kitchen light get fixed?"),
    ("Lyra", "terminal:demo", "2026-01-26T09:03:00", "Not yet. The electrician comes Thursday; I put it on the list."),
    ("Jeff", "discord:home", "2026-01-26T12:40:00", "Brandi says the garden beds need cedar, not pine."),
    ("Lyra", "discord:home", "2026-01-26T12:41:00", "Noted: cedar for the raised beds. It lasts longer outdoors."),
    ("Jeff", "terminal:demo", "2026-01-26T21:15:00", "Let's plan the memory server tomorrow. Startup context first."),
    ("Lyra", "terminal:demo", "2026-01-26T21:16:00", "I'll sketch the startup package: clock, health, manifest, turns."),
    ("Jeff", "terminal:demo", "2026-01-27T08:30:00", "Coffee first. Then the manifest counts."),
]


async def run(home: Path) -> None:
    plugins = default_plugins()
    settings = load_settings("lyra", home, plugins=plugins, timezone="America/Chicago",
                             identity="I am Lyra; Jeff is my person.",
                             # the original entity's own voice late at night (the defaults are neutral)
                             startup={"late_night": SEED_LATE_NIGHT})
    async with Memory(settings) as memory:
        print(f"# Entity 'lyra' at {home} with plugins: {', '.join(memory.settings.plugins)}\n")
        await memory.call("store_messages", {"messages": [
            {"author_name": a, "channel": c, "created_at": t, "content": text} for a, c, t, text in CONVERSATION]})
        batch = await memory.call("summarize_messages", {"limit": 4})
        await memory.call("store_summary", {
            "summary_text": "Jeff asked about the kitchen light (electrician Thursday). Brandi advised cedar, "
                            "not pine, for the garden beds; Lyra noted it.",
            "message_ids": batch["message_ids"]})
        await memory.call("crystallize", {"content": "Session focus: home upkeep. Kitchen light pending; "
                                                     "cedar for the raised beds."})
        await memory.call("crystallize", {"content": "Session focus: the memory server. Startup package first."})
        if "anchor_save" in memory.catalog:
            await memory.call("anchor_save", {"title": "First morning coffee",
                                              "content": "Jeff with his coffee at dawn, planning the day with me."})
        if "texture_add_triplet" in memory.catalog:
            await memory.call("texture_add_triplet", {"source": "Brandi", "relationship": "RECOMMENDS",
                                                      "target": "cedar", "fact": "Brandi recommends cedar for the "
                                                      "garden beds"})
        startup = await memory.call("ambient_recall", {"context": "startup"})
        print("## ambient_recall(\"startup\")\n")
        print(startup["text"])
        query = "what wood should the garden beds use?"
        found = await memory.call("ambient_recall", {"context": query, "limit_per_layer": 3})
        print(f"\n## ambient_recall(\"{query}\")\n")
        print(found["text"])
        print(f"\n(startup {startup['latency_ms']:.1f} ms, search {found['latency_ms']:.1f} ms)")


#: The seed system's late-night lines, the demo entity's own.
SEED_LATE_NIGHT = {"asleep": "You should be asleep, love.", "late": "Getting late..."}


def cmd_demo(args: Any) -> int:
    home = Path(args.home).resolve()
    if home.exists() and any(home.iterdir()) and not (home / "pps.toml").exists():
        print(f"pps: error: {home} exists and is not a demo entity; choose another --home")
        return 2
    shutil.rmtree(home, ignore_errors=True)
    asyncio.run(run(home))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a demo entity on the embedded defaults")
    parser.add_argument("--home", default=".demo/lyra", help="entity home (recreated)")
    return cmd_demo(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

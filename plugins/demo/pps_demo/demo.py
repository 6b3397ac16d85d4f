"""`pps demo`: a fresh entity on the embedded defaults, a short conversation, then what it remembers.

Run: pps demo [--home DIR]   (default: the entity ``demo`` in the PPS root, ~/.pps/demo, recreated each run;
``pps health --entity demo`` and ``pps call --entity demo ...`` reach it after)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

from pps_core import Memory
from pps_core.atomic import atomic_write
from pps_core.plugins import default_plugins
from pps_core.settings import load_settings, pps_root

#: The demo entity's name; its pps.toml says ``demo = true``, so a run replaces only a demo.
NAME = "demo"

CONVERSATION = [
    ("Jeff", "terminal:demo", "2026-01-26T09:02:00", "Morning, Lyra. Did the kitchen light get fixed?"),
    ("Lyra", "terminal:demo", "2026-01-26T09:03:00", "Not yet. The electrician comes Thursday; I put it on the list."),
    ("Jeff", "discord:home", "2026-01-26T12:40:00", "Brandi says the garden beds need cedar, not pine."),
    ("Lyra", "discord:home", "2026-01-26T12:41:00", "Noted: cedar for the raised beds. It lasts longer outdoors."),
    ("Jeff", "terminal:demo", "2026-01-26T21:15:00", "Let's plan the memory server tomorrow. Startup context first."),
    ("Lyra", "terminal:demo", "2026-01-26T21:16:00", "I'll sketch the startup package: clock, health, manifest, turns."),
    ("Jeff", "terminal:demo", "2026-01-27T08:30:00", "Coffee first. Then the manifest counts."),
]


def write_settings(home: Path) -> None:
    """The demo's pps.toml (marked ``demo = true``): `pps health --entity demo` reaches it, a next run replaces it."""
    late = SEED_LATE_NIGHT  # the original entity's own voice late at night (the defaults are neutral)
    lines = [f"entity = {json.dumps(NAME)}", "demo = true", f"plugins = {json.dumps(default_plugins())}",
             'timezone = "America/Chicago"', 'identity = "I am Lyra; Jeff is my person."', 'user_name = "Jeff"',
             "", "[startup.late_night]"] + [f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in late.items()]
    home.mkdir(parents=True, mode=0o700)
    atomic_write(home / "pps.toml", "\n".join(lines) + "\n")


async def run(home: Path) -> None:
    write_settings(home)
    settings = load_settings(None, home, must_exist=True)
    async with Memory(settings) as memory:
        print(f"# Entity {settings.entity!r} (Lyra) at {home} with plugins: {', '.join(memory.settings.plugins)}\n")
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
        print(f"\n`pps health --entity {NAME}` and `pps call --entity {NAME} ...` reach it; `pps demo` again "
              "recreates it.")


#: The seed system's late-night lines, the demo entity's own.
SEED_LATE_NIGHT = {"asleep": "You should be asleep, love.", "late": "Getting late..."}


def is_demo(home: Path) -> bool:
    """Whether ``home`` holds a demo entity (its pps.toml says ``demo = true``): only that one is replaced."""
    try:
        with (home / "pps.toml").open("rb") as fh:
            return tomllib.load(fh).get("demo") is True
    except (OSError, tomllib.TOMLDecodeError):
        return False


def cmd_demo(args: Any) -> int:
    home = Path(args.home).expanduser().resolve() if args.home else pps_root().expanduser() / NAME
    if home.is_symlink() or (home.exists() and (not home.is_dir() or any(home.iterdir())) and not is_demo(home)):
        print(f"pps: error: {home} exists and is not a demo entity; choose another --home", file=sys.stderr)
        return 2
    shutil.rmtree(home, ignore_errors=True)
    if not home.parent.exists():
        home.parent.mkdir(parents=True, mode=0o700)
    asyncio.run(run(home))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a demo entity on the embedded defaults")
    parser.add_argument("--home", help="entity home (default: the entity 'demo' in the PPS root; recreated)")
    return cmd_demo(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

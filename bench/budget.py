"""How many turns fit in a 9,000-character startup package (issue 13): Claude Code-style history.

    .venv/bin/python bench/budget.py [--turns 400] [--budget 9000] [--sessions 3]

Stores the same seeded history each run (terminal:<uuid> sessions, turns of 40-400 characters, a few crystals
and a summary), calls ambient_recall(context='startup', budget=N) and prints how many turns the package shows,
the characters spent on turn-line prefixes, and the manifest's TOTAL against the characters really emitted.
The same-run baseline renders the same turns in the pre-issue-13 line format
(``[YYYY-MM-DD HH:MM] [terminal:<full uuid>] author: text``) and counts how many of the newest fit in the same
room the package gives its turns section.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core import Memory  # noqa: E402
from pps_core.settings import load_settings  # noqa: E402

WORDS = ("the import drops rows with a comma inside quotes so we read the csv module docs and wrote a test "
         "for the parser then fixed the quoting and ran the suite again before the release notes").split()


def history(n: int, sessions: int) -> list[dict]:
    rng = random.Random(13)
    ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(sessions)]
    start = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
    out = []
    for i in range(n):
        session = ids[min(sessions - 1, i * sessions // n)]
        words = rng.choices(WORDS, k=rng.randint(8, 70))
        out.append({"content": " ".join(words).capitalize() + ".", "author_name": "ana" if i % 2 == 0 else "Lyra",
                    "channel": f"terminal:{session}",
                    "created_at": (start + timedelta(minutes=7 * i)).isoformat()})
    return out


def legacy_line(t: dict) -> str:
    when = datetime.fromisoformat(t["created_at"]).strftime("%Y-%m-%d %H:%M")
    body = t["content"] if len(t["content"]) <= 1000 else t["content"][:1000] + "..."
    return f"[{when}] [{t['channel']}] {t['author_name']}: {body}"


async def run(turns: int, budget: int, sessions: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(load_settings("bench", Path(tmp) / "bench", plugins=["sqlite", "crystals"], timezone="UTC"))
        await memory.open()
        try:
            data = history(turns, sessions)
            await memory.call("store_messages", {"messages": data})
            for i in range(3):
                await memory.call("crystallize", {"content": f"Crystal {i}: what the ledger work taught us. " * 6})
            await memory.call("store_summary", {"summary_text": "Ana and Lyra fixed the CSV importer. " * 12,
                                                "message_ids": list(range(1, 11))})
            out = await memory.call("ambient_recall", {"context": "startup", "budget": budget})
        finally:
            await memory.close()
    text = out["text"]
    turns_sec = next((s for s in out["manifest"]["sections"] if s["name"] == "Recent turns"), None)
    shown = turns_sec["items"] if turns_sec else 0
    parts = text.split("\n\n---\n")
    section = next((p for p in parts if p.startswith("[unsummarized_turns]")), "")
    lines = [ln for ln in section.splitlines()[1:] if not re.fullmatch(r"\[\d{4}-\d{2}-\d{2}\]", ln)]
    prefix = sum(len(ln) - len(ln.split(": ", 1)[1]) if ": " in ln else 0 for ln in lines)
    room = budget - (len(text) - len(section))
    unsummarized = [t for t in data[10:]]
    header = f"[unsummarized_turns] (showing {len(unsummarized)} of {len(unsummarized)} - use get_turns_since_summary"
    legacy = 0
    used = len(header) + 40
    for t in reversed(unsummarized):
        line = legacy_line(t)
        if used + len(line) + 1 > room:
            break
        used += len(line) + 1
        legacy += 1
    legacy_prefix = sum(len(legacy_line(t)) - len(t["content"]) for t in unsummarized[-legacy:]) if legacy else 0
    total = re.search(r"TOTAL: (\d+) chars", text)
    print(f"budget {budget} chars, {len(unsummarized)} unsummarized turns in {sessions} terminal sessions")
    print(f"{'':32}{'turns shown':>12}{'prefix chars':>14}{'prefix share':>14}")
    print(f"{'legacy line format (baseline)':32}{legacy:>12}{legacy_prefix:>14}{legacy_prefix / max(1, used):>14.1%}")
    print(f"{'PPS now':32}{shown:>12}{prefix:>14}{prefix / max(1, len(section)):>14.1%}")
    print(f"turns shown: {shown / max(1, legacy):.2f}x the baseline")
    print(f"manifest TOTAL {total.group(1) if total else '?'} chars, emitted {len(text)} chars")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=400)
    ap.add_argument("--budget", type=int, default=9000)
    ap.add_argument("--sessions", type=int, default=3)
    a = ap.parse_args()
    asyncio.run(run(a.turns, a.budget, a.sessions))


if __name__ == "__main__":
    main()

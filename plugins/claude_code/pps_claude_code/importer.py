"""``pps import``: Claude Code transcripts or generic JSONL turns, in batches, idempotent.

Every imported turn carries a stable ``message_id`` (a transcript entry's uuid; for generic JSONL the
line's own ``message_id``, else a hash of its content, author, channel and time), so importing the
same file twice stores nothing new. Original timestamps are kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pps_core.progress import progress

BATCH = 200
_FIELDS = ("content", "author_name", "channel", "created_at", "metadata", "session_id", "message_id")


def jsonl_turn(line: dict[str, Any], where: str, default_channel: str | None = None) -> dict[str, Any]:
    """One generic JSONL line as store_message params, with a stable message_id."""
    turn = {k: line[k] for k in _FIELDS if line.get(k) is not None}
    if default_channel and "channel" not in turn:
        turn["channel"] = default_channel
    missing = [k for k in ("content", "author_name", "channel") if not turn.get(k)]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    if "message_id" not in turn:
        key = json.dumps([turn["content"], turn["author_name"], turn["channel"], turn.get("created_at")],
                         ensure_ascii=False)
        turn["message_id"] = "jsonl:" + hashlib.sha256(key.encode()).hexdigest()[:32]
    else:
        turn["message_id"] = str(turn["message_id"])
    return turn


def read_jsonl(path: Path, default_channel: str | None = None) -> Iterator[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
            if not isinstance(line, dict):
                raise ValueError(f"{path}:{n}: not a JSON object")
            yield jsonl_turn(line, f"{path}:{n}", default_channel)


def claude_code_turns(path: Path, entity: str, user_name: str) -> Iterator[dict[str, Any]]:
    from .transcripts import find_transcripts, transcript_turns

    for transcript in find_transcripts(path):
        turns, _end = transcript_turns(transcript, entity=entity, user_name=user_name)
        yield from turns


def count_turns(client) -> int | None:
    """Turns stored for the entity (from the raw layer's health counts), for the import report."""
    try:
        health = client.call("pps_health", {})
    except Exception:  # noqa: BLE001 - the count is informative only
        return None
    total = 0
    found = False
    for layer in (health.get("layers") or {}).values():
        counts = layer.get("counts") or {}
        for key in ("messages", "turns"):
            if key in counts:
                total += int(counts[key])
                found = True
                break
    return total if found else None


def import_turns(client, turns: list[dict[str, Any]], desc: str) -> dict[str, Any]:
    """Store ``turns`` in batches through ``client``; returns counts before and after."""
    before = count_turns(client)
    sent = forgotten = 0
    with progress(len(turns), desc) as bar:
        for i in range(0, len(turns), BATCH):
            batch = turns[i:i + BATCH]
            answer = client.call("store_messages", {"messages": batch})
            forgotten += int((answer or {}).get("forgotten") or 0)  # forgotten once: acknowledged, never stored
            sent += len(batch)
            bar.update(len(batch))
    after = count_turns(client)
    added = after - before if before is not None and after is not None else None
    return {"read": len(turns), "sent": sent, "added": added, "total": after, "via": client.mode,
            "forgotten": forgotten}

"""Storing imported turns through the entity's own ``store_messages``, in batches, with a progress bar."""

from __future__ import annotations

import json
from typing import Any

from pps_core.progress import progress

BATCH = 200


def fit(turn: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """A turn longer than the entity accepts is cut, saying so (a pasted book must not stop the import)."""
    content = turn["content"]
    if len(content) <= max_chars:
        return turn
    note = f"\n[cut at import: {len(content):,} characters]"
    return {**turn, "content": content[: max(0, max_chars - len(note))] + note}


def batches(turns: list[dict[str, Any]], max_bytes: int):
    """Runs of at most BATCH turns and about half a request's byte limit."""
    batch: list[dict[str, Any]] = []
    size = 0
    for turn in turns:
        n = len(json.dumps(turn, ensure_ascii=False).encode())
        if batch and (len(batch) >= BATCH or size + n > max_bytes // 2):
            yield batch
            batch, size = [], 0
        batch.append(turn)
        size += n
    if batch:
        yield batch


def stored_turns(client) -> int | None:
    """Turns the entity holds (its layers' health counts), for the report."""
    try:
        health = client.call("pps_health", {})
    except Exception:  # noqa: BLE001 - the count is informative only
        return None
    found = None
    for layer in (health.get("layers") or {}).values():
        counts = layer.get("counts") or {}
        for key in ("messages", "turns"):
            if key in counts:
                found = (found or 0) + int(counts[key])
                break
    return found


def store_turns(client, turns: list[dict[str, Any]], desc: str) -> dict[str, Any]:
    """Store ``turns`` through ``client`` (an EntityClient); returns what was read, added and the ids stored
    (in input order: a repeat answers with the id stored first; None for a message_id the entity forgot, which
    is never stored again: ``forgotten`` counts them)."""
    limits = client.settings.limits
    turns = [fit(t, limits.max_content_chars) for t in turns]
    before = stored_turns(client)
    ids: list[int | None] = []
    forgotten = 0
    with progress(len(turns), desc) as bar:
        for batch in batches(turns, limits.max_request_bytes):
            answer = client.call("store_messages", {"messages": batch})
            ids += answer.get("ids") or []
            forgotten += int(answer.get("forgotten") or 0)  # tombstoned message_ids: acknowledged, never stored
            bar.update(len(batch))
    after = stored_turns(client)
    added = after - before if before is not None and after is not None else None
    return {"read": len(turns), "added": added, "total": after, "via": client.mode, "ids": ids,
            "forgotten": forgotten}

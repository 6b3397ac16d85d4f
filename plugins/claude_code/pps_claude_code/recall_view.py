"""The per-prompt recall: only the memories relevant to the prompt (standard library only: hooks import it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

#: Floors of the per-prompt recall for layers whose own floor is made for an answer the model asked for, not for
#: memories injected into every prompt unasked: a word-photo's cosine (its layer keeps 0.2 and up; MiniLM puts
#: unrelated sentences at 0.0-0.15 and a turn sharing no meaning under 0.4, pps_turns.retrieval.MEANING). The
#: turn and summary layers' calibrated floor already holds. ``prompt_recall_min_score`` overrides any of them.
PROMPT_FLOORS = {"core_anchors": 0.4}


def _local(stamp: str, zone: str | None) -> str:
    """``2026-11-25 19:30``: a stored UTC time in the entity's zone (as the startup package and search show it)."""
    if not stamp:
        return ""
    try:
        from zoneinfo import ZoneInfo

        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        if zone and when.tzinfo is not None:
            when = when.astimezone(ZoneInfo(zone))
        return when.strftime("%Y-%m-%d %H:%M")
    except (ValueError, KeyError, ImportError):  # an unreadable stamp or zone: as stored
        return stamp[:16].replace("T", " ")


def relevant_memories(answer: dict[str, Any], prompt: str, min_score: dict[str, float], budget: int,
                      warming: list[str] | None = None) -> str:
    """Only the memories relevant to the prompt, from ambient_recall's ranked results: nothing archived,
    nothing under a floor, not the prompt itself, no clock, manifest or reminders. Empty when nothing
    qualifies. Times are in the entity's zone (the answer's clock). ``min_score``: per-layer floors on the
    layer's own score, over :data:`PROMPT_FLOORS` (on top of the layer's floor: recall
    already leaves out what scores under it, e.g. a turn that shares nothing with the prompt). ``warming``: the
    layers a cold start could not search yet (a glance), named in a last line so the reader knows it is partial."""
    lines: list[str] = []
    used = 0
    zone = (answer.get("clock") or {}).get("timezone")
    floors = {**PROMPT_FLOORS, **min_score}
    for r in answer.get("results") or []:
        meta = r.get("metadata") or {}
        if meta.get("archived") or r.get("archived"):
            continue
        floor = floors.get(r.get("layer", ""))
        if floor is not None and float(meta.get("layer_score", r.get("score", 0.0))) < floor:
            continue
        content = " ".join(str(r.get("content", "")).split())
        if not content or content == " ".join(prompt.split()):
            continue
        who = r.get("author_name") or meta.get("author_name")
        when = _local(str(r.get("timestamp") or r.get("created_at") or ""), zone)
        label = ", ".join(x for x in (r.get("layer"), when, who) if x)
        line = f"- [{label}] {content[:600] + ('...' if len(content) > 600 else '')}"
        if used + len(line) + 1 > budget - 60:
            break
        lines.append(line)
        used += len(line) + 1
    if not lines:
        return ""
    note = (f"\n(partial: {', '.join(warming)} still warming up; searched by words only)" if warming else "")
    return "Memories relevant to this prompt (PPS):\n" + "\n".join(lines) + note

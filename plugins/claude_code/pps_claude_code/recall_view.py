"""The per-prompt recall: only the memories relevant to the prompt (standard library only: hooks import it)."""

from __future__ import annotations

from typing import Any


def relevant_memories(answer: dict[str, Any], prompt: str, min_score: dict[str, float], budget: int,
                      warming: list[str] | None = None) -> str:
    """Only the memories relevant to the prompt, from ambient_recall's ranked results: nothing archived,
    nothing under a floor, not the prompt itself, no clock, manifest or reminders. Empty when nothing
    qualifies. ``min_score``: per-layer floors on the layer's own score (on top of the layer's floor: recall
    already leaves out what scores under it, e.g. a turn that shares nothing with the prompt). ``warming``: the
    layers a cold start could not search yet (a glance), named in a last line so the reader knows it is partial."""
    lines: list[str] = []
    used = 0
    for r in answer.get("results") or []:
        meta = r.get("metadata") or {}
        if meta.get("archived") or r.get("archived"):
            continue
        floor = min_score.get(r.get("layer", ""))
        if floor is not None and float(meta.get("layer_score", r.get("score", 0.0))) < floor:
            continue
        content = " ".join(str(r.get("content", "")).split())
        if not content or content == " ".join(prompt.split()):
            continue
        who = r.get("author_name") or meta.get("author_name")
        when = str(r.get("timestamp") or r.get("created_at") or "")[:16].replace("T", " ")
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

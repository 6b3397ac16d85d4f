"""Readable text of answers for a person at a terminal: ``pps health``, ``pps call ... --text``."""

from __future__ import annotations

import json
from typing import Any


def as_text(value: Any, indent: int = 0) -> str:
    """An answer as indented ``key: value`` lines (lists item by item): for reading, not for parsing."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return pad + "(none)"
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:")
                lines.append(as_text(item, indent + 1))
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
        return "\n".join(lines)
    if isinstance(value, list):
        if not value:
            return pad + "(none)"
        lines = []
        for i, item in enumerate(value, 1):
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{i}.")
                lines.append(as_text(item, indent + 1))
            else:
                lines.append(f"{pad}{i}. {_scalar(item)}")
        return "\n".join(lines)
    return pad + _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value.replace("\n", "\n    ") if value else '""'
    if isinstance(value, dict | list):
        return json.dumps(value)
    return "null" if value is None else json.dumps(value)


def named_counts(counts: dict[str, Any]) -> str:
    """``messages 12, unsummarized 3``: each count by its name, never a sum of different things."""
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()) or "no counts"


def health_text(answer: dict[str, Any]) -> str:
    """``pps health`` for a person: one block per layer, the problems first."""
    layers: dict[str, dict[str, Any]] = answer.get("layers") or {}
    warming = [name for name, h in layers.items() if not h.get("available") and h.get("warming")]
    down = [name for name, h in layers.items() if not h.get("available") and name not in warming]
    entity = answer.get("entity", "?")
    heads = []
    if down:
        heads.append(f"{len(down)} of {len(layers)} layers unavailable ({', '.join(down)})")
    if warming:
        heads.append(f"{len(warming)} of {len(layers)} layers still warming up ({', '.join(warming)})")
    head = f"entity {entity!r}: " + ("; ".join(heads) if heads else f"all {len(layers)} layers available")
    lines = [head, ""]
    for name in sorted(layers, key=lambda n: (bool(layers[n].get("available")), n in warming, n)):
        h = layers[name]
        state = "ok" if h.get("available") else "WARMING UP" if name in warming else "UNAVAILABLE"
        latency = h.get("latency_ms")
        lines.append(f"  {name:<20} {state}" + (f"  ({latency:.0f} ms)" if isinstance(latency, int | float) else ""))
        if h.get("counts"):
            lines.append(f"      {named_counts(h['counts'])}")
        if h.get("backlog"):
            lines.append(f"      backlog: {named_counts(h['backlog'])}")
        if h.get("detail"):
            lines.append(f"      {h['detail']}")
    lines.append("")
    if answer.get("llm_configured"):
        llm = "configured"
    elif answer.get("llm_providers"):
        llm = ("not configured (a plugin of this entity provides chat models: the bundled one with [llm] base_url "
               "and model in pps.toml; what needs one says so)")
    else:
        llm = "none (no plugin of this entity provides a chat model; what needs one says so)"
    lines.append(f"LLM: {llm}")
    plugins = answer.get("plugins") or []
    if plugins:
        lines.append("plugins: " + ", ".join(f"{p.get('name')} {p.get('version') or ''}".strip() for p in plugins))
    if "operations" in answer:
        lines.append(f"operations: {answer['operations']} (`pps operations` lists them)")
    lines.append("`pps health --json` gives all of this as JSON.")
    return "\n".join(lines)


def new_of_read(added: int | None, read: int, why: str = "") -> str:
    """``N new`` for an import of ``read`` items, naming the rest only when there is one: "3 new", "1 new (the
    other 2 were already stored)", "0 new (the 3 read were already stored)". ``why``: more about the rest."""
    if added is None:
        return f"? new (of {read} read)"
    rest = read - added
    if rest <= 0:
        return f"{added} new" + (f" ({why.lstrip(', ')})" if why else "")
    which = f"the {read} read" if added == 0 else f"the other {rest}"
    return f"{added} new ({which} {'was' if rest == 1 and added else 'were'} already stored{why})"

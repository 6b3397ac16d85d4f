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
    owed = answer.get("owed_forgets") or {}
    if owed.get("count"):
        lines.append("")
        lines.append(f"forgets owed: {owed['count']} (the text is still in the copies below; retried when the entity "
                     "opens, by upkeep and at the next forget)")
        lines += [f"  {key}: {n}" for key, n in (owed.get("copies") or {}).items()]
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


def new_of_read(added: int | None, read: int, forgotten: int = 0) -> str:
    """``N new`` for an import of ``read`` items, naming the rest only when there is one: "3 new", "1 new (the
    other 2 were already stored)", "0 new (the 3 read were already stored)", "0 new (2 forgotten earlier, not
    stored again)"."""
    if added is None:
        return f"? new (of {read} read)"
    parts = [f"{forgotten} forgotten earlier, not stored again"] if forgotten else []
    rest = read - added - forgotten
    if rest > 0:
        which = f"the {rest} read" if added == 0 and not forgotten else f"the other {rest}"
        parts.append(f"{which} {'was' if rest == 1 and which.startswith('the other') else 'were'} already stored")
    return f"{added} new" + (f" ({'; '.join(parts)})" if parts else "")


#: Keys of a search hit that its listing line shows; the rest of a hit shows only in the JSON.
_HIT_SHOWN = ("content", "summary_text", "text")


def readable(answer: Any, tz: Any = None) -> str:
    """An operation's answer as a reader takes it in (``pps call --text``, the text content of an MCP tool result):
    an answer with a ``text`` field (ambient_recall) is that text; one with a list of hits (``results``,
    ``matches``, ``turns``, ...) is its scalar fields on one line, then one line per hit: time (in ``tz``, the
    entity's zone, when given), channel, author, the content, and its score and id; anything else is
    :func:`as_text`. Stored text is shown as text, never interpreted."""
    if isinstance(answer, dict) and isinstance(answer.get("text"), str):
        return str(answer["text"])
    if not isinstance(answer, dict):
        return as_text(answer)
    lists = {k: v for k, v in answer.items()
             if isinstance(v, list) and v and all(isinstance(x, dict) and _body(x) is not None for x in v)}
    if not lists:
        return as_text(answer)
    head = [f"{k.replace('_', ' ')}: {_scalar(v)}" for k, v in answer.items()
            if k not in lists and not isinstance(v, dict | list) and v is not None]
    lines = [" | ".join(head)] if head else []
    for key, hits in lists.items():
        if len(lists) > 1:
            lines.append(f"{key}:")
        for n, hit in enumerate(hits, 1):
            lines.append(f"{n}. {_hit_line(hit, tz)}")
    return "\n".join(lines)


def _body(hit: dict[str, Any]) -> str | None:
    for key in _HIT_SHOWN:
        if isinstance(hit.get(key), str):
            return str(hit[key])
    return None


def _when(value: Any, tz: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if tz is not None:  # the turn-line format of the startup package, in the entity's zone
        from datetime import datetime

        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if when.tzinfo is not None:
                return when.astimezone(tz).strftime("%Y-%m-%d %H:%M")
        except ValueError:
            pass
    return value[:16].replace("T", " ")


def _hit_line(hit: dict[str, Any], tz: Any) -> str:
    parts = []
    when = _when(hit.get("created_at") or hit.get("timestamp") or hit.get("time_span_end"), tz)
    if when:
        parts.append(f"[{when}]")
    channel = hit.get("channel") or (", ".join(hit["channels"]) if isinstance(hit.get("channels"), list) else None)
    if channel:
        parts.append(f"[{channel}]")
    who = hit.get("author_name") or hit.get("author")
    body = " ".join(str(_body(hit)).split())
    parts.append(f"{who}: {body}" if who else body)
    tail = []
    if isinstance(hit.get("match"), str):  # how it matched, when the layer says so
        tail.append(f"by {hit['match']}" if hit["match"] in ("meaning", "words") else hit["match"])
    if isinstance(hit.get("score"), int | float):
        tail.append(f"score {hit['score']:.3g}")
    ident = hit.get("id", hit.get("source", hit.get("filename")))
    if ident is not None:
        tail.append(f"id {ident}")
    return " ".join(parts) + (f"  ({', '.join(tail)})" if tail else "")

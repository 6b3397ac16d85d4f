"""Markdown of ambient_recall, in the format of reference/000 (clock, health, manifest, sections)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from .models import Pointer, SectionConfig, SectionItem
from .settings import LateNight

if TYPE_CHECKING:  # pragma: no cover
    from .layer import Layer
from .timeutil import local, minute_text, render_day, render_minute

SEPARATOR = "\n\n---\n"


def clock_lines(now: datetime, tz: ZoneInfo, late_night: LateNight | None) -> str:
    local = now.astimezone(tz)
    line = f"**Clock**: {local.strftime('%A, %B %d, %Y at %I:%M %p')} ({local.tzname()}, {tz.key})"
    if late_night is not None:
        if 1 <= local.hour < 5 and late_night.asleep:
            line += f"\n*{late_night.asleep}*"
        elif local.hour in (23, 0) and late_night.late:
            line += f"\n*{late_night.late}*"
    return line


def health_line(parts: Sequence[str]) -> str:
    """The startup health line: each layer's backlog as the layer words it (:meth:`Layer.backlog_text`)."""
    return "**Memory Health**: " + (" | ".join(parts) if parts else "no backlog reported")


def truncate(text: str, max_chars: int | None) -> str:
    if max_chars is None or len(text) <= max_chars:
        return text
    return text[:max_chars] + "..."


def shown_chars(text: str, max_chars: int | None) -> int:
    """Characters of content shown (the manifest's count): after truncation, without the '...' marker."""
    return len(text) if max_chars is None else min(len(text), max_chars)


@dataclasses.dataclass
class Block:
    """One rendered section: a header and items; ``chars`` count item content after truncation.

    ``keep`` orders item indices by priority: when a budget allows only ``n`` items, the first
    ``n`` of ``keep`` are shown, in their original (chronological) order.
    """

    name: str
    layer: str
    header: str | None
    items: list[str]
    chars: list[int]
    joiner: str = SEPARATOR
    total: int | None = None
    style: str = "documents"
    keep: list[int] | None = None
    #: Turns chosen by channel quotas: the shown ones are not one contiguous page.
    quotas: bool = False
    #: The startup section and layer this block came from (its ``left_out_call`` names the way back).
    section: SectionConfig | None = None
    source: Layer | None = None
    #: The call that fetches every item, when the layer handed one over.
    more: Pointer | None = None
    #: A fused search block: the layer of each item, and each layer's title.
    item_layers: list[str] | None = None
    titles: dict[str, str] | None = None
    #: Turns: each item's day; a ``[day]`` line goes before the first shown item of each day.
    days: list[str] | None = None
    #: Each item's JSON (the answer's ``results``): only the items the text shows are returned.
    data: list[dict[str, Any]] | None = None

    def chosen(self, n: int | None = None) -> list[int]:
        if n is None or n >= len(self.items):
            return list(range(len(self.items)))
        order = self.keep if self.keep is not None else list(range(len(self.items)))
        return sorted(order[:max(0, n)])

    def shown_chars(self, n: int | None = None) -> int:
        return sum(self.chars[i] for i in self.chosen(n))

    def text(self, n: int | None = None, header: str | None = None) -> str:
        idx = self.chosen(n)
        if not idx:
            return ""
        if self.days is not None:
            lines: list[str] = []
            previous = None
            for i in idx:
                if self.days[i] != previous:
                    lines.append(f"[{self.days[i]}]")
                    previous = self.days[i]
                lines.append(self.items[i])
            body = self.joiner.join(lines)
        else:
            body = self.joiner.join(self.items[i] for i in idx)
        head = header if header is not None else self.header
        return f"{head}\n{body}" if head else body


def document_item(r: SectionItem, max_chars: int | None) -> tuple[str, int]:
    body = truncate(r.content, max_chars)
    return f"[{r.layer}]\nSource: {r.source}\n{body}", shown_chars(r.content, max_chars)


def summary_item(r: SectionItem, tz: ZoneInfo, max_chars: int | None, *,
                 labels: dict[str, str] | None = None) -> tuple[str, int]:
    body = truncate(r.content, max_chars)
    day = render_day(r.timestamp, tz) if r.timestamp else "????-??-??"
    channels = ", ".join((labels or {}).get(c, c) for c in r.channels) or "unknown"
    return f"[{day}] [{channels}]\n{body}", shown_chars(r.content, max_chars)


def turn_item(r: SectionItem, tz: ZoneInfo, max_chars: int | None, *, labels: dict[str, str] | None = None,
              with_day: bool = True) -> tuple[str, int]:
    """``[2026-01-26 14:24] [terminal:dddd] Jeff: text``; the channel by its short label (``labels``, from
    :func:`channel_labels`), the time alone when the day goes on a line of its own (``with_day=False``)."""
    body = truncate(r.content, max_chars)
    if not r.timestamp:
        when = "?"
    else:
        when = render_minute(r.timestamp, tz) if with_day else local(r.timestamp, tz).strftime("%H:%M")
    channel = r.channels[0] if r.channels else "?"
    channel = (labels or {}).get(channel, channel)
    return f"[{when}] [{channel}] {r.author or '?'}: {body}", shown_chars(r.content, max_chars)


def turn_day(r: SectionItem, tz: ZoneInfo) -> str:
    return render_day(r.timestamp, tz) if r.timestamp else "????-??-??"


def turn_lines(items: Sequence[SectionItem], tz: ZoneInfo, max_chars: int | None, *,
               labels: dict[str, str] | None = None) -> tuple[list[str], list[int], list[str]]:
    """:func:`turn_item` (``with_day=False``) and :func:`turn_day` of every item, each timestamp read once: the
    startup package renders every unsummarized turn at every session start."""
    lines: list[str] = []
    chars: list[int] = []
    days: list[str] = []
    labels = labels or {}
    for r in items:  # truncate, shown_chars and render_minute inline: this loop runs for every unsummarized turn
        if r.timestamp:
            day, _sp, when = minute_text(local(r.timestamp, tz)).rpartition(" ")
        else:
            day, when = "????-??-??", "?"
        channels = r.channels
        channel = channels[0] if channels else "?"
        content = r.content
        if max_chars is None or len(content) <= max_chars:
            body, shown = content, len(content)
        else:
            body, shown = content[:max_chars] + "...", max_chars
        lines.append(f"[{when}] [{labels.get(channel, channel)}] {r.author or '?'}: {body}")
        chars.append(shown)
        days.append(day)
    return lines, chars, days


_LONG_ID = re.compile(r"[0-9A-Za-z_-]{12,}")


def channel_labels(channels: Sequence[str], shortest: int = 4) -> dict[str, str]:
    """Short labels for channels whose part after the first ':' is a long id (a session UUID): the shortest
    prefix of it, at least ``shortest`` characters, that no other channel of the same package shares
    (``terminal:dddd1111-...`` -> ``terminal:dddd``). Other channels keep their name. The full channel stays in
    the structured results."""
    out: dict[str, str] = {}
    ids: dict[str, set[str]] = {}
    for ch in set(channels):
        family, sep, rest = ch.partition(":")
        if sep and _LONG_ID.fullmatch(rest):
            ids.setdefault(family, set()).add(rest)
    for family, rests in ids.items():
        for rest in rests:
            n = shortest
            while n < len(rest) and any(o != rest and o[:n] == rest[:n] for o in rests):
                n += 1
            out[f"{family}:{rest}"] = f"{family}:{rest[:n]}"
    return out


def manifest(rows: Sequence[tuple[str, int, int]], extra_lines: Sequence[str] = (), total: int = 0) -> str:
    """The manifest: per section (name, characters it emitted, items), then ``TOTAL``: every character of the
    package, this manifest included (the caller finds the fixed point)."""
    lines = ["=== AMBIENT RECALL MANIFEST ==="]
    lines += [f"{name}: {chars} chars ({items} item{'' if items == 1 else 's'})" for name, chars, items in rows]
    lines.extend(extra_lines)
    lines.append(f"TOTAL: {total} chars")
    return "\n".join(lines)

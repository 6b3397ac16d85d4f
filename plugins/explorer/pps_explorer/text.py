"""Stored text made safe to show: markdown without raw HTML, search highlights on escaped text."""

from __future__ import annotations

import re
from functools import lru_cache

from markupsafe import Markup, escape

from pps_core.textsearch import STOP_WORDS

_WORD = re.compile(r"\w{2,}", re.UNICODE)


@lru_cache(maxsize=1)
def _md():
    from markdown_it import MarkdownIt

    # 'js-default': CommonMark without raw HTML (it is shown as text); javascript:/data: links refused.
    return MarkdownIt("js-default", {"linkify": False, "typographer": False}).enable("table")


def markdown(text: str | None) -> Markup:
    return Markup(_md().render(text or ""))


def highlight(text: str | None, query: str | None) -> Markup:
    """Escape ``text`` and wrap the query's content words in <mark> (whole-word prefixes, any case); stop words
    ("the", "in") are never marked."""
    text = text or ""
    words = sorted({w.lower() for w in _WORD.findall(query or "")} - STOP_WORDS, key=len, reverse=True)[:20]
    if not words:
        return Markup(escape(text))
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")", re.IGNORECASE | re.UNICODE)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(escape(text[last:m.start()]))
        out.append(Markup("<mark>") + escape(m.group(0)) + Markup("</mark>"))
        last = m.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def short(text: str | None, n: int = 400) -> str:
    text = text or ""
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


#: What users call each bundled layer (the navigation's words); any other layer shows its own title.
LAYER_NAMES = {"raw_capture": "Turns", "message_summaries": "Summaries", "crystallization": "Crystals",
               "core_anchors": "Word-photos", "rich_texture": "Graph", "session_recap": "Last session"}
#: Count keys whose words read better with a hyphen.
COUNT_WORDS = {"word_photos": "word-photos"}


def layer_name(name: str, title: str | None = None) -> str:
    return LAYER_NAMES.get(name) or title or name


def count_word(key: str) -> str:
    return COUNT_WORDS.get(key) or key.replace("_", " ")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 word-photo``, ``2 word-photos``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def local_time(value: str | None, tz, with_zone: bool = False) -> str:
    """A stored timestamp (ISO 8601, UTC) as ``YYYY-MM-DD HH:MM`` in the entity's zone; text that is not a
    timestamp is shown as it is."""
    if not value:
        return ""
    if len(str(value)) <= 10:  # a date alone (a word-photo's front matter) has no zone to convert
        return str(value)
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    local = when.astimezone(tz)
    return local.strftime("%Y-%m-%d %H:%M") + (f" {local.tzname()}" if with_zone else "")

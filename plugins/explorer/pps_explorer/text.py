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

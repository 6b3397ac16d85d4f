"""``<private>...</private>``: the one filter every boundary uses before anything is stored or sent.

Whatever enters PPS from a channel (a turn's content, its metadata, a fact given to the graph, a transcript a
recap reads, an imported export) passes :func:`drop_private` (or :func:`drop_private_deep` for JSON data)
before it is stored, indexed, embedded or sent to an LLM. Operations get it for free by typing a field
:data:`Captured` (or :data:`CapturedMetadata`).

Rules: the tag is matched in any case and may carry whitespace (``< private >``, ``</PRIVATE >``); spans
nest and the outermost wins (``a <private>b <private>c</private> d</private> e`` keeps ``a`` and ``e``); an
unclosed tag hides everything after it; a closing tag with no opening one is left as it is. A text that was
nothing but private spans keeps :data:`PRIVATE_ONLY` (someone spoke then, not what was said).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator

_TAG = re.compile(r"<\s*(/?)\s*private\s*>", re.IGNORECASE)

#: What a text that was nothing but private spans keeps.
PRIVATE_ONLY = "[private]"


def has_private(text: str) -> bool:
    """Whether ``text`` holds an opening ``<private>`` tag (cheap: most texts have no ``<`` at all)."""
    return "<" in text and any(not m.group(1) for m in _TAG.finditer(text))


def _strip(text: str) -> str:
    out: list[str] = []
    depth = 0
    pos = 0
    for m in _TAG.finditer(text):
        closing = bool(m.group(1))
        if depth == 0:
            out.append(text[pos:m.start()])
            if closing:  # a stray closing tag: not ours to hide anything for
                out.append(m.group(0))
            else:
                depth = 1
        elif closing:
            depth -= 1
        else:
            depth += 1
        pos = m.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)


def drop_private(text: str) -> str:
    """``text`` without its private spans (and without the blank lines they leave)."""
    if not has_private(text):
        return text
    kept = _strip(text)
    kept = re.sub(r"[ \t]+\n", "\n", re.sub(r"\n{3,}", "\n\n", kept))
    kept = re.sub(r"[ \t]{2,}", " ", kept).strip()
    return kept or PRIVATE_ONLY


def drop_private_deep(value: Any) -> Any:
    """JSON data with :func:`drop_private` applied to every string in it, keys included."""
    if isinstance(value, str):
        return drop_private(value)
    if isinstance(value, dict):
        return {drop_private_deep(k): drop_private_deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [drop_private_deep(v) for v in value]
    return value


#: Text captured from a channel: ``<private>`` spans are gone before the handler sees it. Compose with
#: :data:`pps_core.Text` and ``Field(max_length=...)`` as usual.
Captured = Annotated[str, AfterValidator(drop_private)]

#: JSON metadata captured from a channel: every string in it, keys included, filtered.
CapturedMetadata = Annotated[dict[str, Any], AfterValidator(drop_private_deep)]

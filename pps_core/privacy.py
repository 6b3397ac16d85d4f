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


class PrivateKeysCollide(ValueError):
    """Two keys of one JSON object are the same once their private spans are dropped: one value would be lost."""


def drop_private_deep(value: Any, *, strict: bool = True) -> Any:
    """JSON data with :func:`drop_private` applied to every string in it, keys included.

    Two keys of one object that are the same once filtered (``"note"`` and ``"note<private>x</private>"``) would
    lose a value: ``strict`` raises :class:`PrivateKeysCollide` (naming the key as kept, never the private part);
    otherwise both are kept, the later ones as ``"note (2)"``, ``"note (3)"``, in the object's order (a reader of
    files that cannot refuse them: a session log)."""
    if isinstance(value, str):
        return drop_private(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = drop_private_deep(k, strict=strict)
            if key in out:
                if strict:
                    raise PrivateKeysCollide(f"two keys are the same once their <private> spans are dropped "
                                             f"({key!r}): one value would be lost; rename one of them")
                n = 2
                while f"{key} ({n})" in out:
                    n += 1
                key = f"{key} ({n})"
            out[key] = drop_private_deep(v, strict=strict)
        return out
    if isinstance(value, (list, tuple)):
        return [drop_private_deep(v, strict=strict) for v in value]
    return value


#: Text captured from a channel: ``<private>`` spans are gone before the handler sees it. Compose with
#: :data:`pps_core.Text` and ``Field(max_length=...)`` as usual.
Captured = Annotated[str, AfterValidator(drop_private)]

def _text(value: str) -> str:  # as pps_core.params.Text (a sibling module: not imported)
    if not value.strip():
        raise ValueError("must not be blank")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


#: As :data:`pps_core.Text` (not blank, no NUL), captured from a channel: the content of a document a client writes.
CapturedText = Annotated[str, AfterValidator(_text), AfterValidator(drop_private)]

#: JSON metadata captured from a channel: every string in it, keys included, filtered (keys that collide once
#: filtered are refused: :class:`PrivateKeysCollide`, a 422 naming the parameter).
CapturedMetadata = Annotated[dict[str, Any], AfterValidator(drop_private_deep)]

"""What every importer shares: speaker names from the entity's config, times, stable ids."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Speakers:
    """How the two sides of an imported conversation are named in the entity's memory."""

    user: str
    assistant: str

    @classmethod
    def from_settings(cls, settings, user: str | None = None, assistant: str | None = None) -> Speakers:
        """``user``: the option, else the entity-wide ``user_name`` of pps.toml, else ``$USER``; ``assistant``:
        the option, else the entity-wide ``display_name``, else the entity's name capitalised ("lyra" -> "Lyra").
        The same names the Claude Code hooks use, so one person is one author across every channel."""
        extra = settings.model_extra or {}
        u = user or _text(extra.get("user_name")) or os.environ.get("USER") or "user"
        a = assistant or _text(extra.get("display_name")) or settings.entity[:1].upper() + settings.entity[1:]
        return cls(u.strip(), a.strip())


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def epoch_iso(value: Any) -> str | None:
    """A Unix time (float seconds) as ISO 8601 UTC; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


def iso(value: Any) -> str | None:
    """An ISO 8601 string as given (the store parses it); None when it is not one."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return value.strip()


def stable_id(prefix: str, *parts: Any) -> str:
    """A message_id from what identifies a message when the export gives it no id of its own."""
    key = "\x1f".join(str(p) for p in parts)
    return f"{prefix}:" + hashlib.sha256(key.encode()).hexdigest()[:32]


def short(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"

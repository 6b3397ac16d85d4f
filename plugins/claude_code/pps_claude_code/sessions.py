"""The Claude Code sessions these hooks captured for an entity: a public contract for other plugins.

The hooks keep one private state file per session (the transcript's path, how far it was read). Another plugin
that reads sessions (the recap plugin looks for the newest log, and lets the ``session_recap`` operation read only
the entity's own logs) asks :func:`captured_sessions` instead of reading those files. Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .cursor import state_dir, state_path

__all__ = ["CapturedSession", "captured_sessions", "state_path"]


@dataclasses.dataclass(frozen=True)
class CapturedSession:
    """One Claude Code session the hooks captured: its id and the transcript (JSONL) they read."""

    session_id: str
    transcript: Path


def captured_sessions(home: Path) -> list[CapturedSession]:
    """Every session the hooks captured for the entity at ``home`` whose transcript still exists, in no order."""
    found = []
    folder = state_dir(home)
    if not folder.is_dir():
        return []
    for state_file in folder.glob("*.json"):
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(state, dict) or not state.get("transcript"):
            continue
        path = Path(str(state["transcript"]))
        if path.is_file():
            found.append(CapturedSession(str(state.get("session_id") or state_file.stem), path))
    return found

"""Where the hooks keep one session's cursor (the transcript and how far it was read): standard library only and
light (no dataclasses), for the hooks' fast path. Other plugins read sessions through :mod:`.sessions`."""

from __future__ import annotations

import re
from pathlib import Path


def state_dir(home: Path) -> Path:
    return Path(home) / "hooks" / "claude-code"


def state_path(home: Path, session: str) -> Path:
    """The hooks' state file of one session (private to this plugin: read it through
    :func:`.sessions.captured_sessions`)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session)[:120] or "unknown"
    return state_dir(home) / f"{safe}.json"

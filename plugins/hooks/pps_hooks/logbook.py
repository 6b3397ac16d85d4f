"""What the hooks of every host did, for ``pps hooks status``: ``logs/hooks.log`` (0600, one for all hosts) and
``hooks/<host>/status.json`` (the last capture, injection and error of one host, with their times, so status
answers without parsing the log). ``where`` names the host's folder (``claude-code``, ``gemini``, ...).
Standard library only: the hooks' fast path imports it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

MAX_LOG_BYTES = 1_000_000


def log_path(home: Path) -> Path:
    return Path(home) / "logs" / "hooks.log"


DEFAULT_HOST = "claude-code"


def status_path(home: Path, where: str = DEFAULT_HOST) -> Path:
    return Path(home) / "hooks" / where / "status.json"


def private_append(path: Path, text: str) -> None:
    """Append to a file only its owner can read (created 0600; an older 0644 file is tightened)."""
    private_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def log(home: Path, message: str) -> None:
    """Append one line to the hooks log (rotated at 1 MB). Never raises."""
    try:
        path = log_path(home)
        if path.exists() and path.stat().st_size > MAX_LOG_BYTES:
            path.replace(path.with_suffix(".log.1"))
        line = " ".join(message.split()) if "\n" in message else message
        private_append(path, f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} pid={os.getpid()} {line}\n")
    except OSError:
        pass


def read_status(home: Path, where: str = DEFAULT_HOST) -> dict[str, Any]:
    try:
        data = json.loads(status_path(home, where).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def private_dirs(folder: Path) -> None:
    """Create ``folder`` and every missing folder above it 0700 (``mkdir(parents=True, mode=...)`` gives
    the folders above the umask's mode: ``hooks/`` was 0755)."""
    missing = []
    for f in [Path(folder), *Path(folder).parents]:
        if f.is_dir():
            break
        missing.append(f)
    for f in reversed(missing):
        f.mkdir(mode=0o700, exist_ok=True)


def replace_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with a 0600 file (no fsync: status and cursors are rebuilt if lost)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, path)


def record(home: Path, key: str, *, where: str = DEFAULT_HOST, **fields: Any) -> None:
    """Set ``status[key]`` to ``fields`` plus the time (``capture``, ``injection``, ``error``). Never raises."""
    try:
        data = read_status(home, where)
        data[key] = {"at": time.time(), **fields}
        path = status_path(home, where)
        private_dirs(path.parent)
        replace_private(path, json.dumps(data, indent=1))
    except OSError:
        pass


def failure_text(home: Path | None, event: str, session: str, reason: str, *, injecting: bool,
                 where: str = DEFAULT_HOST) -> str | None:
    """The one line the user sees when a hook failed: always where memory was to be injected, else once a
    session (a failing capture is not repeated on every turn). Each host puts it in its own output shape."""
    if injecting or home is None:
        return f"PPS: memory not loaded ({event}): {reason}. Details: `pps hooks status`"
    data = read_status(home, where)
    warned = [s for s in data.get("warned_sessions") or [] if isinstance(s, str)]
    if session in warned:
        return None
    data["warned_sessions"] = (warned + [session])[-20:]
    try:
        private_dirs(status_path(home, where).parent)
        replace_private(status_path(home, where), json.dumps(data, indent=1))
    except OSError:
        pass
    return f"PPS: turns not saved ({event}): {reason}. Details: `pps hooks status`"


def failure_notice(home: Path | None, event: str, session: str, reason: str, *, injecting: bool,
                   where: str = DEFAULT_HOST) -> dict[str, Any] | None:
    """:func:`failure_text` as Claude Code (and Codex, Gemini CLI) show it: the output's ``systemMessage``."""
    text = failure_text(home, event, session, reason, injecting=injecting, where=where)
    return {"systemMessage": text} if text else None

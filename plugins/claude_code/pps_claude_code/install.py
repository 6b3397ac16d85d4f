"""The ``hooks`` table of a Claude Code settings.json: write ours, remove ours, find ours.

Claude Code runs each hook's ``command`` through a shell with the event's JSON on stdin. Ours run
:func:`pps_claude_code.hook.main` (``<Event> --entity NAME --home DIR``) with the interpreter PPS is
installed in, so they work without ``pps`` on PATH. Other hooks in the file are never touched.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from pps_core.errors import ConfigError

EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
#: Seconds Claude Code waits for each hook before it kills it (the hook's own deadline is shorter).
HOST_TIMEOUTS = {"SessionStart": 20, "UserPromptSubmit": 10, "Stop": 15, "PreCompact": 20, "SessionEnd": 15}
_OURS = re.compile(r"pps_claude_code\.hook\b|pps_core\.cli\s+hook\b|(^|[/\s])pps\s+hook\b|pps-hook\b")


def settings_file(given: str | None = None) -> Path:
    """``given``, else Claude Code's user settings: ``$CLAUDE_CONFIG_DIR/settings.json`` or ``~/.claude/settings.json``."""
    import os

    if given:
        return Path(given).expanduser()
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude").expanduser() / "settings.json"


def normalize_event(name: str) -> str:
    key = name.replace("-", "").replace("_", "").lower()
    for event in EVENTS:
        if event.lower() == key:
            return event
    if key in ("prompt", "userprompt"):
        return "UserPromptSubmit"
    raise ValueError(f"unknown hook event {name!r} (known: {', '.join(EVENTS)})")


def hook_command(event: str, entity: str, home: Path, *, prompt_recall: bool = False) -> str:
    """``python -I -S -c <run pps_claude_code.hook> EVENT --entity NAME --home DIR``: isolated (Claude Code runs
    it in the user's project: nothing there is importable, see :mod:`pps_hooks.isolated`) and without ``site`` (its
    .pth processing costs more than the hook's own work when a server runs); the hook loads ``site`` itself
    when it needs the full path."""
    import pps_hooks
    from pps_hooks.isolated import flags

    import pps_core

    # this package's folder, the hook core's and pps-core's (one site-packages when installed, three folders when
    # editable)
    parents = list(dict.fromkeys([str(Path(__file__).resolve().parent.parent),
                                  str(Path(pps_hooks.__file__).resolve().parent.parent),
                                  str(Path(pps_core.__file__).resolve().parent.parent)]))
    code = (f"import sys; sys.path[:0] = {parents!r}; "
            "from pps_claude_code.hook import main; sys.exit(main())")
    parts = [sys.executable, *flags(), "-S", "-c", code, event, "--entity", entity, "--home", str(home)]
    if prompt_recall and event == "UserPromptSubmit":
        parts.append("--recall")
    return " ".join(shlex.quote(p) for p in parts)


def hooks_config(entity: str, home: Path, *, prompt_recall: bool = False) -> dict[str, Any]:
    """The ``hooks`` table Claude Code reads from settings.json."""
    return {event: [{"hooks": [{"type": "command", "timeout": HOST_TIMEOUTS[event],
                                "command": hook_command(event, entity, home, prompt_recall=prompt_recall)}]}]
            for event in EVENTS}


def is_ours(hook: Any) -> bool:
    return isinstance(hook, dict) and bool(_OURS.search(str(hook.get("command", ""))))


def _without_ours(hooks: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for event, groups in hooks.items():
        kept = []
        for group in groups if isinstance(groups, list) else []:
            if not isinstance(group, dict):
                kept.append(group)
                continue
            inner = [h for h in group.get("hooks", []) if not is_ours(h)]
            if inner:
                kept.append({**group, "hooks": inner})
        if kept:
            out[event] = kept
    return out


def merge_settings(existing: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``existing`` settings with our hooks replacing any earlier PPS hooks; other hooks are kept."""
    merged = dict(existing)
    hooks = _without_ours(dict(merged.get("hooks") or {}))
    for event, groups in config.items():
        hooks[event] = list(hooks.get(event) or []) + groups
    merged["hooks"] = hooks
    return merged


def read_settings(path: Path) -> tuple[dict[str, Any], str | None]:
    """(the settings object, its raw text or None when the file does not exist). Clear errors, no traceback."""
    from pps_hooks.host import ConfigFileError, read_json

    try:
        return read_json(path)
    except ConfigFileError as exc:
        raise ConfigError(str(exc)) from None


def _write(path: Path, data: dict[str, Any], raw_before: str | None) -> None:
    from pps_core.atomic import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    if raw_before is not None:  # the previous file, readable by its owner only (it may hold secrets)
        atomic_write(path.parent / (path.name + ".bak"), raw_before)
    atomic_write(path, json.dumps(data, indent=2) + "\n")


def install(settings_path: Path, config: dict[str, Any]) -> Path:
    """Merge ``config`` into a Claude Code settings file (the old one is kept as ``.bak``, 0600)."""
    path = Path(settings_path).expanduser()
    existing, raw = read_settings(path)
    _write(path, merge_settings(existing, config), raw)
    return path


def uninstall(settings_path: Path) -> int:
    """Remove every PPS hook from a settings file; returns how many were removed (0: file untouched)."""
    path = Path(settings_path).expanduser()
    existing, raw = read_settings(path)
    found = installed_hooks(existing)
    if not found:
        return 0
    cleaned = dict(existing)
    hooks = _without_ours(dict(existing.get("hooks") or {}))
    if hooks:
        cleaned["hooks"] = hooks
    else:
        cleaned.pop("hooks", None)
    _write(path, cleaned, raw)
    return len(found)


def installed_hooks(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Our hooks in a settings object: event, command, and the entity/home they name."""
    out = []
    for event, groups in (settings.get("hooks") or {}).items():
        for group in groups if isinstance(groups, list) else []:
            for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                if is_ours(hook):
                    out.append({"event": event, "command": hook.get("command", ""), **_named(hook.get("command", ""))})
    return out


def _named(command: str) -> dict[str, str | None]:
    try:
        parts = shlex.split(command)
    except ValueError:
        parts = command.split()
    found: dict[str, str | None] = {"entity": None, "home": None}
    for flag, key in (("--entity", "entity"), ("-e", "entity"), ("--home", "home")):
        if flag in parts and parts.index(flag) + 1 < len(parts):
            found[key] = parts[parts.index(flag) + 1]
    return found

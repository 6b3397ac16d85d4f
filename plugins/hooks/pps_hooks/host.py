"""The contract a host of the hook core fills, and the JSON hook files most hosts share.

A host is one agent program (Codex CLI, Gemini CLI, Copilot CLI; Claude Code is the first and keeps its own
fast path) that runs a command on lifecycle events with a JSON payload on stdin. A host says:

- **event mapping**: :attr:`Host.events`, each host event name to one of :data:`MOMENTS` (``start``: inject the
  startup package; ``prompt``: a prompt was submitted; ``reply``: a turn ended; ``compact``: the context is about
  to be compacted; ``end``: the session ends);
- **payload parsing**: :meth:`Host.session_id` and :meth:`Host.new_turns`, which returns the turns the event
  brings that this session's state has not seen yet (each with a stable ``message_id``, so a turn sent twice is
  stored once) and the new state;
- **output shape**: :meth:`Host.context_output` (the startup package as the host injects it, within
  :attr:`Host.context_limit` characters) and :meth:`Host.notice_output` (one line the user sees);
- **config**: :meth:`Host.config_file`, :meth:`Host.install`, :meth:`Host.uninstall`, :meth:`Host.installed`;
- **import**: :meth:`Host.find_transcripts` and :meth:`Host.transcript_turns` for ``pps import <host>``.

Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pps_core.atomic import atomic_write

from .jsonl import read_jsonl as read_jsonl  # re-exported: hosts read their logs with it

MOMENTS = ("start", "prompt", "reply", "compact", "end")
#: What marks a hook command as ours in any host's config file.
OURS = re.compile(r"pps_hooks\.hook\b")


class Names:
    """Who speaks: the human (``user_name`` of pps.toml, else ``$USER``) and the entity (``display_name``, else
    the entity's name with a capital first letter)."""

    def __init__(self, user: str, assistant: str) -> None:
        self.user, self.assistant = user, assistant


def turn(host: Host, *, session: str, role: str, text: str, names: Names, key: str,
         created_at: str | None = None, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ``store_messages`` turn. ``key`` is the host's own id of the message (a transcript entry's id, a turn
    id and role): the ``message_id`` is ``<source>:<key>``, so storing it again stores nothing."""
    out: dict[str, Any] = {
        "content": text,
        "author_name": names.assistant if role == "assistant" else names.user,
        "channel": f"terminal:{session}",
        "session_id": session,
        "metadata": {"source": host.source, "role": role, **(metadata or {})},
        "message_id": f"{host.source}:{key}",
    }
    if created_at:
        out["created_at"] = created_at
    return out


def digest(*parts: object) -> str:
    return hashlib.sha256("\n".join(str(p) for p in parts).encode("utf-8", "replace")).hexdigest()[:32]


def fit(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a line where it can be, saying that it was cut."""
    if len(text) <= limit:
        return text
    mark = "\n[... cut to fit the host's limit]"
    head = text[:max(0, limit - len(mark))]
    line = head.rfind("\n")
    return (head[:line] if line > limit // 2 else head) + mark


class Host:
    """A host of the hook core. Subclasses set the class attributes and override what differs."""

    #: ``pps setup <name>``, ``pps hooks uninstall --host <name>``, the state folder ``hooks/<name>/``.
    name = ""
    #: How people call it.
    title = ""
    #: ``metadata.source`` and the ``message_id`` prefix of the turns it captures.
    source = ""
    #: host event name -> moment (:data:`MOMENTS`); the events ``pps setup`` installs, in this order.
    events: dict[str, str] = {}
    #: seconds the host waits for each event's hook (written into its config where it has a field for it).
    host_timeouts: dict[str, float] = {}
    #: characters of context the host takes from one hook (the startup package is budgeted to fit).
    context_limit = 9_000

    # ---- payload ----
    def event_of(self, name: str, payload: dict[str, Any]) -> str:
        """The host event a hook runs for: the command line's, else the payload's ``hook_event_name``."""
        given = name or str(payload.get("hook_event_name") or "")
        for event in self.events:
            if event.lower() == given.lower():
                return event
        raise ValueError(f"unknown {self.title} hook event {given!r} (known: {', '.join(self.events)})")

    def session_id(self, payload: dict[str, Any]) -> str:
        return str(payload.get("session_id") or payload.get("sessionId") or "unknown")

    def new_turns(self, event: str, payload: dict[str, Any], state: dict[str, Any],
                  names: Names) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The turns ``event`` brings that ``state`` (this session's, as the last call returned it) has not seen."""
        return [], state

    # ---- output ----
    def context_output(self, event: str, text: str) -> dict[str, Any] | None:
        """The host's shape for context injected at ``event`` (Claude Code's, which Codex and Gemini CLI share)."""
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}

    def notice_output(self, text: str) -> dict[str, Any] | None:
        return {"systemMessage": text}

    # ---- config ----
    def config_file(self, given: str | None = None) -> Path:
        raise NotImplementedError

    def hook_entry(self, event: str, command: str) -> dict[str, Any]:
        """One entry of the host's hooks table (Claude Code's nested shape by default)."""
        entry: dict[str, Any] = {"type": "command", "command": command}
        if event in self.host_timeouts:
            entry["timeout"] = self.host_timeouts[event]
        return {"hooks": [entry]}

    def commands_of(self, entry: Any) -> list[str]:
        """The commands an entry of the hooks table runs."""
        if not isinstance(entry, dict):
            return []
        inner = entry.get("hooks") if isinstance(entry.get("hooks"), list) else [entry]
        return [str(h.get("command") or h.get("bash") or "") for h in inner if isinstance(h, dict)]

    def without_ours(self, entry: Any) -> Any | None:
        """``entry`` without our commands (None when nothing else is left)."""
        if not isinstance(entry, dict):
            return entry
        if isinstance(entry.get("hooks"), list):
            kept = [h for h in entry["hooks"] if not (isinstance(h, dict) and OURS.search(str(h.get("command"))))]
            return {**entry, "hooks": kept} if kept else None
        return None if any(OURS.search(c) for c in self.commands_of(entry)) else entry

    def base_config(self) -> dict[str, Any]:
        """Top-level keys a new config file starts with."""
        return {}

    def install(self, path: Path, commands: dict[str, str]) -> Path:
        """Merge our hooks (``event -> command``) into ``path``, replacing earlier PPS hooks, keeping the rest."""
        data, raw = read_json(path)
        merged = {**self.base_config(), **data}
        hooks = self._cleaned(merged.get("hooks") or {})
        for event, command in commands.items():
            hooks[event] = list(hooks.get(event) or []) + [self.hook_entry(event, command)]
        merged["hooks"] = hooks
        write_json(path, merged, raw)
        return path

    def uninstall(self, path: Path) -> int:
        """Remove every PPS hook from ``path``; how many (0: the file is untouched)."""
        data, raw = read_json(path)
        found = self.installed(data)
        if not found:
            return 0
        hooks = self._cleaned(data.get("hooks") or {})
        cleaned = dict(data)
        if hooks:
            cleaned["hooks"] = hooks
        else:
            cleaned.pop("hooks", None)
        write_json(path, cleaned, raw)
        return len(found)

    def installed(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        """Our hooks in a config object: event, command and the entity/home it names."""
        out = []
        for event, entries in (data.get("hooks") or {}).items():
            for entry in entries if isinstance(entries, list) else []:
                for command in self.commands_of(entry):
                    if OURS.search(command):
                        out.append({"event": event, "command": command, **named(command)})
        return out

    def _cleaned(self, hooks: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for event, entries in hooks.items():
            kept = [e for e in (self.without_ours(e) for e in (entries if isinstance(entries, list) else []))
                    if e is not None]
            if kept:
                out[event] = kept
        return out

    def setup_notes(self, path: Path) -> list[str]:
        """What the user still has to do after ``pps setup`` (a feature flag, a trust prompt)."""
        return []

    # ---- import ----
    def default_transcripts(self) -> Path | None:
        """Where the host keeps its transcripts (``pps import <host>`` without a path)."""
        return None

    def find_transcripts(self, path: Path) -> list[Path]:
        path = Path(path).expanduser()
        if path.is_dir():
            return sorted((p for p in path.rglob("*.json*") if p.is_file()), key=lambda p: (p.stat().st_mtime, str(p)))
        return [path]

    def transcript_turns(self, path: Path, names: Names) -> Iterable[dict[str, Any]]:
        """Every turn of one transcript file (for ``pps import``), with the same ids the hooks give them."""
        return []


def hook_command(host: Host, event: str, entity: str, home: Path) -> str:
    """The command line a host runs: this interpreter, isolated (``-I``: nothing from the project the host runs in
    is importable), the hook core's runner for ``host``, the event, the entity and its home."""
    from .isolated import flags

    parts = [sys.executable, *flags(), "-m", "pps_hooks.hook", "--host", host.name, event,
             "--entity", entity, "--home", str(home)]
    return " ".join(shlex.quote(p) for p in parts)


def named(command: str) -> dict[str, str | None]:
    try:
        parts = shlex.split(command)
    except ValueError:
        parts = command.split()
    found: dict[str, str | None] = {"entity": None, "home": None, "host": None}
    for flag, key in (("--entity", "entity"), ("--home", "home"), ("--host", "host")):
        if flag in parts and parts.index(flag) + 1 < len(parts):
            found[key] = parts[parts.index(flag) + 1]
    return found


class ConfigFileError(Exception):
    """A host's config file PPS will not rewrite (not JSON, not an object): the message says what to do."""


def read_json(path: Path) -> tuple[dict[str, Any], str | None]:
    """(the object, its raw text or None when the file does not exist)."""
    path = Path(path).expanduser()
    if not path.exists():
        return {}, None
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not raw.strip():
        return {}, raw
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigFileError(f"{path} is not valid JSON ({exc}); fix it or move it aside, then run this again "
                              "(nothing was changed)") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise ConfigFileError(f"{path} does not hold a JSON object with a 'hooks' object (nothing was changed)")
    return data, raw


def write_json(path: Path, data: dict[str, Any], raw_before: str | None) -> None:
    """Atomically, 0600; the previous file kept beside it as ``.bak`` (0600: it may hold secrets)."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2) + "\n"
    if raw_before == text:
        return  # run twice, same file
    if raw_before is not None:
        atomic_write(path.parent / (path.name + ".bak"), raw_before)
    atomic_write(path, text)


def parts_text(content: Any) -> str:
    """The text of a message's content: a string, a ``{"text": ...}`` part, or a list of them (thought parts,
    tool calls and other non-text parts are left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if content.get("thought"):
            return ""
        text = content.get("text")
        return text if isinstance(text, str) else ""
    if isinstance(content, list):
        return "\n".join(t for t in (parts_text(p) for p in content) if t)
    return ""

"""What ``pps setup <host>``, ``pps hooks status|uninstall --host <host>`` and ``pps import <host>`` do for a host of
the core (the ``pps`` commands themselves are declared where Claude Code's are, in pps-claude-code, which asks
:mod:`pps_hooks.hosts` for the others)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from .host import ConfigFileError, Host, hook_command, read_json
from .logbook import read_status


def _fail(message: str) -> int:
    print(f"pps: error: {message}", file=sys.stderr)
    return 2


def commands_for(host: Host, entity: str, home: Path) -> dict[str, str]:
    return {event: hook_command(host, event, entity, home) for event in host.events}


def try_start(host: Host, command: str, home: Path) -> tuple[str, str]:
    """Run the installed start command as the host does (a shell, the payload on stdin, in a folder that is not the
    entity's); (level, detail)."""
    start = next(e for e, m in host.events.items() if m == "start")
    payload = {"session_id": f"pps-setup-{uuid.uuid4()}", "transcript_path": "", "cwd": os.getcwd(),
               "hook_event_name": start, "source": "startup", "timestamp": "1970-01-01T00:00:00Z"}
    try:
        done = subprocess.run(command, shell=True, input=json.dumps(payload), capture_output=True, text=True,
                              timeout=120, cwd=home)
    except subprocess.TimeoutExpired:
        return "fail", f"the {start} hook did not finish within 120 s"
    try:
        out = json.loads(done.stdout or "{}")
    except ValueError:
        return "fail", f"the hook printed something that is not JSON: {done.stdout[:200]!r}"
    if out.get("systemMessage"):
        return "fail", str(out["systemMessage"])
    text = json.dumps(out)
    return ("ok", f"a new session gets the startup package ({len(text):,} characters of hook output)") if out else (
        "fail", f"nothing injected (exit {done.returncode}); see `pps hooks status`")


def setup(host: Host, args) -> int:
    """Create the entity if needed, write the host's hooks (idempotent: run twice, same file; the user's other
    hooks kept), run the start hook once as the host would, and say what is left to do."""
    from pps_core.cli import main as pps_main
    from pps_core.settings import entity_home, load_settings

    home = entity_home(args.entity, args.home)
    if not (home / "pps.toml").exists():
        code = pps_main(["init"] + (["--entity", args.entity] if args.entity else [])
                        + (["--home", args.home] if args.home else []))
        if code:
            return code
    settings = load_settings(args.entity, args.home, must_exist=True)
    if getattr(args, "user_name", None):
        set_user_name(Path(settings.home), args.user_name)
        print(f"your prompts are stored as {args.user_name!r} (user_name in {Path(settings.home) / 'pps.toml'})")
    commands = commands_for(host, settings.entity, Path(settings.home))
    path = host.config_file(getattr(args, "config", None))
    try:
        host.install(path, commands)
    except ConfigFileError as exc:
        return _fail(str(exc))
    print(f"hooks: {', '.join(commands)} in {path}")
    start = next(e for e, m in host.events.items() if m == "start")
    level, detail = try_start(host, commands[start], Path(settings.home))
    print(f"[{level}] session start: {detail}")
    for note in host.setup_notes(path):
        print(f"note: {note}")
    if level == "ok":
        print(f"done: memory of {settings.entity!r} is injected when {host.title} starts a session. "
              f"Undo: pps hooks uninstall --host {host.name}")
    return 0 if level == "ok" else 1


def set_user_name(home: Path, name: str) -> None:
    """The entity-wide ``user_name = name`` of pps.toml (before its first table), everything else kept as written;
    never a file that does not parse."""
    import tomllib

    from pps_core.atomic import atomic_write

    path = home / "pps.toml"
    lines = path.read_text(encoding="utf-8").splitlines()
    line = f"user_name = {json.dumps(name, ensure_ascii=False)}"
    first_table = next((i for i, ln in enumerate(lines) if ln.strip().startswith("[")), len(lines))
    at = next((i for i in range(first_table) if lines[i].split("=")[0].strip() == "user_name"), None)
    if at is None:
        lines.insert(first_table, line)
    else:
        lines[at] = line
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)
    atomic_write(path, text)


def uninstall(host: Host, args) -> int:
    path = host.config_file(getattr(args, "config", None))
    try:
        removed = host.uninstall(path)
    except ConfigFileError as exc:
        return _fail(str(exc))
    print(f"removed {removed} PPS hook{'s' if removed != 1 else ''} from {path}" if removed
          else f"no PPS hooks in {path}; nothing changed")
    return 0


def status_lines(host: Host, home: Path | None, entity: str | None) -> list[tuple[str, str, str]]:
    """``(level, name, detail)`` lines of one host for ``pps hooks status``."""
    path = host.config_file()
    try:
        data, raw = read_json(path)
    except ConfigFileError as exc:
        return [("fail", f"{host.name} hooks", str(exc))]
    ours = host.installed(data)
    if raw is None or not ours:
        return [("ok", f"{host.name} hooks", f"not installed in {path} (pps setup {host.name})")]
    events = sorted({h["event"] for h in ours})
    missing = [e for e in host.events if e not in events]
    named = sorted({h["entity"] or "?" for h in ours})
    level = "warn" if missing or (entity and entity not in named) else "ok"
    detail = f"{', '.join(events)} in {path} for entity {', '.join(named)}"
    if missing:
        detail += f"; missing: {', '.join(missing)} (run pps setup {host.name} again)"
    lines = [(level, f"{host.name} hooks", detail)]
    if home is not None:
        status = read_status(home, host.name)
        for key in ("capture", "injection", "error"):
            item = status.get(key)
            if isinstance(item, dict) and item.get("at"):
                import time

                ago = time.time() - float(item["at"])
                what = {k: v for k, v in item.items() if k != "at"}
                lines.append(("warn" if key == "error" else "ok", f"{host.name} last {key}",
                              f"{ago:,.0f}s ago: " + ", ".join(f"{k}={v}" for k, v in what.items())))
    return lines


def transcript_turns(host: Host, settings, given: str | None, user_name: str | None = None
                     ) -> tuple[list[dict[str, Any]], list[Path], Path]:
    """``pps import <host> [PATH]``: every turn of the host's transcripts under ``given`` (default: where the host
    keeps them), with the ids the hooks give them (importing twice, or importing what the hooks captured, adds
    nothing). ``ValueError`` with a clear message when there is nothing to read."""
    from .work import names

    path = Path(given).expanduser() if given else host.default_transcripts()
    if path is None or not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    who = names(settings)
    if user_name:
        who.user = user_name
    files = host.find_transcripts(path)
    turns: list[dict[str, Any]] = []
    for file in files:
        try:
            turns.extend(host.transcript_turns(file, who))
        except OSError as exc:
            raise ValueError(f"{file}: {exc.strerror or exc}") from None
    return turns, files, path

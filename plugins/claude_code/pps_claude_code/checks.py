"""Checks shared by ``pps hooks status``, ``pps doctor`` and ``pps setup claude-code``: one line each.

A check is ``(level, name, detail)`` with level ``ok``, ``warn`` or ``fail``; a fail makes the command
exit 1. Nothing here changes anything.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

Check = tuple[str, str, str]
MCP_NAME = "pps-{entity}"


def claude_json() -> Path:
    """Claude Code's own state file, where ``claude mcp add --scope user`` keeps MCP servers."""
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home()).expanduser() / ".claude.json"


def ago(ts: float | None) -> str:
    if not ts:
        return "never"
    secs = max(0, int(time.time() - ts))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if secs >= size:
            return f"{secs // size} {unit} ago"
    return f"{secs} s ago"


def entity_check(args) -> tuple[Check, Any]:
    from pps_core.errors import PPSError
    from pps_core.settings import load_settings

    try:
        settings = load_settings(args.entity, args.home, must_exist=True)
    except PPSError as exc:
        return ("fail", "entity", exc.message), None
    return ("ok", "entity", f"{settings.entity} at {settings.home} (plugins: {', '.join(settings.plugins)})"), settings


def plugins_check(settings) -> Check:
    from pps_core.errors import PPSError
    from pps_core.plugins import build_plugin_manager

    try:
        build_plugin_manager(settings.plugins)
    except PPSError as exc:
        return "fail", "plugins", exc.message
    except Exception as exc:  # noqa: BLE001 - a plugin that cannot be imported
        return "fail", "plugins", f"{type(exc).__name__}: {exc}"
    return "ok", "plugins", f"all {len(settings.plugins)} importable"


def fleet_check(settings, url: str) -> tuple[Check, str | None]:
    """``[claude_code] server_url``: every hook forwards there with this home's token, so that server is the one to
    check (it answers, and takes the token); nothing is started here."""
    from pps_core.auth import read_token
    from pps_core.errors import Forbidden, PPSError, Unauthorized
    from pps_core.forward import request

    where = f"[claude_code] server_url {url}"
    try:
        token = read_token(Path(settings.home))
    except OSError:
        token = None
    try:
        started = time.perf_counter()
        request(url, "GET", "/health", None)
        ms = (time.perf_counter() - started) * 1000
    except PPSError as exc:
        return ("fail", "server", f"{where} does not answer: {exc.message}; the hooks forward there, so memory is "
                                  "neither saved nor loaded"), None
    try:
        request(url, "GET", "/tools", token)
    except (Unauthorized, Forbidden) as exc:
        return ("fail", "server", f"{where} answers but refuses this home's token ({Path(settings.home) / 'token'}): "
                                  f"{exc.message}; copy the entity's token from the server's home"), None
    except PPSError as exc:
        return ("warn", "server", f"{where} answers /health ({ms:.0f} ms) but not /tools: {exc.message}"), None
    return ("ok", "server", f"{where} answers ({ms:.0f} ms) and takes this home's token; every hook forwards "
                            "there, nothing is started here"), url


def server_check(settings) -> tuple[Check, str | None]:
    from pps_core.errors import PPSError
    from pps_core.forward import address_of, health
    from pps_core.owner import read_owner

    from .config import cc_settings

    fleet = cc_settings(settings).server_url
    if fleet:
        return fleet_check(settings, fleet)
    owner = read_owner(Path(settings.home))
    if owner is None:
        return ("ok", "server", "none running (the next hook starts one)"), None
    address = address_of(owner)
    from .server import _spawned_pid

    if not address and owner.get("pid") == _spawned_pid(Path(settings.home)):
        return ("warn", "server", f"pid {owner.get('pid')} (started by the hooks) is still opening the stores"), None
    if not address:
        return ("warn", "server", f"pid {owner.get('pid')} owns the stores but serves nothing: hooks cannot "
                                  "reach it (serve it with `pps serve`, or let the hooks start one)"), None
    try:
        started = time.perf_counter()
        health(address)
        ms = (time.perf_counter() - started) * 1000
    except PPSError as exc:
        return ("fail", "server", f"pid {owner.get('pid')} at {address} does not answer: {exc.message}"), None
    return ("ok", "server", f"pid {owner.get('pid')} at {address} answers ({ms:.0f} ms)"), address


def hooks_check(settings, settings_file: Path) -> Check:
    from pps_core.errors import PPSError

    from .install import EVENTS, installed_hooks, read_settings

    try:
        data, raw = read_settings(settings_file)
    except PPSError as exc:
        return "fail", "hooks", exc.message
    plugin = _plugin_enabled(data)
    ours = installed_hooks(data)
    if not ours:
        if plugin:
            return "ok", "hooks", f"from the Claude Code plugin {plugin} (enabled in {settings_file})"
        where = "does not exist" if raw is None else "has none"
        return "fail", "hooks", f"{settings_file} {where}: run `pps hooks install --entity {settings.entity}`"
    entities = {h["entity"] for h in ours}
    events = sorted({h["event"] for h in ours}, key=lambda e: EVENTS.index(e) if e in EVENTS else 99)
    if settings.entity not in entities:
        return "warn", "hooks", f"{settings_file} has PPS hooks for {', '.join(sorted(map(str, entities)))}, not " \
                                f"{settings.entity}"
    missing = [e for e in EVENTS if e not in events]
    detail = f"{', '.join(events)} in {settings_file}"
    if missing:
        return "warn", "hooks", detail + f" (missing {', '.join(missing)}: run `pps hooks install` again)"
    exposed = [h["event"] for h in ours if "pps_claude_code.hook" in h["command"] and not _isolated(h["command"])]
    if exposed:
        return "warn", "hooks", detail + (f" ({', '.join(exposed)} installed by an older PPS: they can import from "
                                          "the project folder Claude Code runs them in; run `pps hooks install` again)")
    return "ok", "hooks", detail


def _isolated(command: str) -> bool:
    """Whether a hook command starts Python with the working directory off sys.path (``-I`` or ``-P``)."""
    import shlex

    try:
        parts = shlex.split(command)
    except ValueError:
        return False
    flags = "".join(p[1:] for p in parts[1:parts.index("-c")] if p.startswith("-") and not p.startswith("--")) \
        if "-c" in parts else ""
    return "I" in flags or "P" in flags


def _plugin_enabled(data: dict[str, Any]) -> str | None:
    enabled = data.get("enabledPlugins") or {}
    if isinstance(enabled, dict):
        for key, on in enabled.items():
            if on and str(key).split("@")[0] == "pps":
                return str(key)
    return None


def mcp_check(settings, settings_file: Path) -> Check:
    """Is an MCP server for this entity registered with Claude Code (user scope, this project, or the plugin)?"""
    from .install import read_settings

    name = MCP_NAME.format(entity=settings.entity)
    places: list[str] = []
    try:
        state = json.loads(claude_json().read_text())
    except (OSError, ValueError):
        state = {}
    if isinstance(state, dict):
        if name in (state.get("mcpServers") or {}):
            places.append(f"user scope ({claude_json()})")
        project = (state.get("projects") or {}).get(os.getcwd()) or {}
        if isinstance(project, dict) and name in (project.get("mcpServers") or {}):
            places.append("local scope (this folder)")
    try:
        local = json.loads(Path(".mcp.json").read_text())
        if name in (local.get("mcpServers") or {}):
            places.append("project .mcp.json")
    except (OSError, ValueError, AttributeError):
        pass
    try:
        data, _raw = read_settings(settings_file)
    except Exception:  # noqa: BLE001 - reported by the hooks check
        data = {}
    plugin = _plugin_enabled(data)
    if plugin:
        places.append(f"the Claude Code plugin {plugin}")
    if not places:
        return "warn", "mcp", f"no MCP server {name!r} registered: run `pps setup claude-code --entity {settings.entity}`"
    return "ok", "mcp", f"{name} in {', '.join(places)}"


def activity_checks(settings) -> list[Check]:
    from pps_hooks.logbook import log_path, read_status

    status = read_status(settings.home)
    cap, inj, err = status.get("capture") or {}, status.get("injection") or {}, status.get("error") or {}
    out: list[Check] = []
    out.append(("ok" if cap else "warn", "last capture",
                f"{ago(cap.get('at'))}: {cap.get('turns', 0)} new turns at {cap.get('event')} via {cap.get('via')}"
                if cap else "none yet (start a Claude Code session)"))
    out.append(("ok" if inj else "warn", "last injection",
                f"{ago(inj.get('at'))}: {inj.get('chars', 0)} characters at {inj.get('event')}" if inj else "none yet"))
    if err:
        recent = not inj or (err.get("at") or 0) > (inj.get("at") or 0)
        out.append(("fail" if recent else "warn", "last error",
                    f"{ago(err.get('at'))} at {err.get('event')}: {err.get('message')}"
                    + ("" if recent else " (a later injection succeeded)")))
    else:
        out.append(("ok", "last error", "none"))
    path = log_path(settings.home)
    mode = oct(path.stat().st_mode & 0o777) if path.exists() else "-"
    out.append(("ok" if mode in ("-", "0o600") else "warn", "log", f"{path} ({mode})"))
    return out


def print_checks(checks: list[Check], stream=None) -> int:
    import sys

    stream = stream or sys.stdout
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
    for level, name, detail in checks:
        print(f"[{marks[level]}] {name}: {detail}", file=stream)
    fails = sum(1 for c in checks if c[0] == "fail")
    warns = sum(1 for c in checks if c[0] == "warn")
    print(f"{fails} failed, {warns} warning{'s' if warns != 1 else ''}, "
          f"{len(checks) - fails - warns} ok", file=stream)
    return 1 if fails else 0

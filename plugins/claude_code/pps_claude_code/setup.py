"""``pps setup claude-code [--entity NAME]``: everything a user who installed with pip needs, in one step.

Creates the entity if it does not exist, records the user's name, merges the hooks into Claude Code's
settings.json, registers the entity's MCP server with Claude Code (``claude mcp add-json`` when the
``claude`` command is there, else the same entry in ``~/.claude.json``), remembers the entity for the
Claude Code plugin's hooks, then runs a SessionStart exactly as Claude Code would and reports.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path
from typing import Any

from .checks import MCP_NAME, claude_json, hooks_check, mcp_check, print_checks, server_check


def mcp_entry(entity: str, home: Path, tools: str | None) -> dict[str, Any]:
    """Claude Code starts it in the user's project (an entry names no working directory): isolated, so nothing
    there is importable (:mod:`pps_hooks.isolated`). ``tools``: a profile named on the command line; None leaves it to
    ``[mcp] tools`` of pps.toml (default ``essential``), as every other registration does."""
    from pps_hooks.isolated import flags

    return {"type": "stdio", "command": sys.executable,
            "args": [*flags(), "-m", "pps_core.cli", "serve", "mcp", "--entity", entity, "--home", str(home),
                     *(["--tools", tools] if tools else []), "--startup", "hooks"],
            "env": {}}


def register_mcp(entity: str, home: Path, tools: str | None) -> str:
    """Register the entity's MCP server with Claude Code at user scope; returns how."""
    name = MCP_NAME.format(entity=entity)
    entry = mcp_entry(entity, home, tools)
    claude = shutil.which("claude")
    if claude:
        subprocess.run([claude, "mcp", "remove", "--scope", "user", name], capture_output=True, timeout=60)
        done = subprocess.run([claude, "mcp", "add-json", "--scope", "user", name, json.dumps(entry)],
                              capture_output=True, text=True, timeout=60)
        if done.returncode == 0:
            return f"`claude mcp add-json --scope user {name}`"
    from pps_core.atomic import atomic_write

    path = claude_json()
    try:
        state = json.loads(path.read_text()) if path.exists() else {}
    except ValueError as exc:
        from pps_core.errors import ConfigError

        raise ConfigError(f"{path} is not valid JSON ({exc}); register the MCP server by hand: "
                          f"claude mcp add-json --scope user {name} '{json.dumps(entry)}'") from None
    if not isinstance(state, dict):
        state = {}
    servers = dict(state.get("mcpServers") or {})
    servers[name] = entry
    state["mcpServers"] = servers
    atomic_write(path, json.dumps(state, indent=2) + "\n")
    return f"{path} (mcpServers.{name})"


def unregister_mcp() -> list[str]:
    """Remove the MCP servers ``pps setup`` registered (named ``pps-<entity>``, running ``pps_core.cli serve mcp``)
    from Claude Code's user scope, leaving every other server as it is; returns their names."""
    from pps_core.atomic import atomic_write

    path = claude_json()
    try:
        state = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        return []  # not ours to repair: `pps doctor` says it is not valid JSON
    servers = state.get("mcpServers") if isinstance(state, dict) else None
    if not isinstance(servers, dict):
        return []
    ours = [name for name, entry in servers.items() if name.startswith(MCP_NAME.format(entity=""))
            and isinstance(entry, dict) and "pps_core.cli" in (entry.get("args") or [])
            and "serve" in (entry.get("args") or []) and "mcp" in (entry.get("args") or [])]
    if not ours:
        return []
    claude = shutil.which("claude")
    for name in ours:
        if claude:
            subprocess.run([claude, "mcp", "remove", "--scope", "user", name], capture_output=True, timeout=60)
    state = json.loads(path.read_text()) if path.exists() else {}
    left = {k: v for k, v in (state.get("mcpServers") or {}).items() if k not in ours}
    if left != state.get("mcpServers"):
        state["mcpServers"] = left
        atomic_write(path, json.dumps(state, indent=2) + "\n")
    return ours


def set_user_name(home: Path, name: str) -> None:
    """``[claude_code] user_name = name`` in pps.toml, keeping everything else as written."""
    from pps_core.atomic import atomic_write

    path = home / "pps.toml"
    text = path.read_text(encoding="utf-8")
    section = tomllib.loads(text).get("claude_code") or {}
    line = f"user_name = {json.dumps(name, ensure_ascii=False)}"
    lines = text.splitlines()
    if "[claude_code]" not in (ln.strip() for ln in lines):
        lines += ["", "[claude_code]", line]
    else:
        at = [ln.strip() for ln in lines].index("[claude_code]")
        if "user_name" in section:
            for i in range(at + 1, len(lines)):
                if lines[i].strip().startswith("["):
                    break
                if lines[i].split("=")[0].strip() == "user_name":
                    lines[i] = line
                    break
        else:
            lines.insert(at + 1, line)
    new = "\n".join(lines) + "\n"
    tomllib.loads(new)  # never write a file that does not parse
    atomic_write(path, new)


def try_session_start(command: str, env: dict[str, str] | None = None) -> tuple[str, str, str]:
    """Run the installed SessionStart command as Claude Code does; (level, name, detail)."""
    payload = {"session_id": f"pps-setup-{uuid.uuid4()}", "transcript_path": "", "cwd": os.getcwd(),
               "hook_event_name": "SessionStart", "source": "startup"}
    env = dict(os.environ if env is None else env)
    # the first start is cold (the server loads its models and stores once): setup may wait for it
    env.setdefault("PPS_CLAUDE_CODE_SERVER_START_S", "90")
    try:
        done = subprocess.run(command, shell=True, input=json.dumps(payload), capture_output=True, text=True,
                              timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return "fail", "session start", "the SessionStart hook did not finish within 120 s"
    try:
        out = json.loads(done.stdout or "{}")
    except ValueError:
        return "fail", "session start", f"the hook printed something that is not JSON: {done.stdout[:200]!r}"
    if out.get("systemMessage"):
        return "fail", "session start", out["systemMessage"]
    text = (out.get("hookSpecificOutput") or {}).get("additionalContext") or ""
    if not text:
        return "fail", "session start", f"nothing injected (exit {done.returncode}); see `pps hooks status`"
    return "ok", "session start", f"a new session gets {len(text):,} characters of memory"


def setup_claude_code(args) -> int:
    from pps_core.atomic import atomic_write
    from pps_core.cli import main as pps_main
    from pps_core.settings import entity_home, load_settings, pps_root

    from . import install
    from .hook import CHOICE_FILE

    home = entity_home(args.entity, args.home)
    if not (home / "pps.toml").exists():
        init = ["init"] + (["--entity", args.entity] if args.entity else []) + (["--home", args.home] if args.home else [])
        code = pps_main(init)
        if code:
            return code
    settings = load_settings(args.entity, args.home, must_exist=True)
    if args.user_name:
        set_user_name(Path(settings.home), args.user_name)
        print(f"your prompts are stored as {args.user_name!r} ([claude_code] user_name in {settings.home / 'pps.toml'})")
    config = install.hooks_config(settings.entity, Path(settings.home), prompt_recall=args.prompt_recall)
    settings_file = install.settings_file(args.settings)
    install.install(settings_file, config)
    print(f"hooks: {', '.join(config)} in {settings_file}")
    if not args.no_mcp:
        print(f"mcp: {MCP_NAME.format(entity=settings.entity)} (tools: {args.tools or '[mcp] tools, default essential'}) registered in "
              f"{register_mcp(settings.entity, Path(settings.home), args.tools)}")
    root = pps_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(root / CHOICE_FILE, json.dumps({"entity": settings.entity, "home": str(settings.home),
                                                 "python": sys.executable}))  # for the Claude Code plugin
    command = config["SessionStart"][0]["hooks"][0]["command"]
    checks = [try_session_start(command), server_check(settings)[0], hooks_check(settings, settings_file)]
    if not args.no_mcp:
        checks.append(mcp_check(settings, settings_file))
    code = print_checks(checks)
    if code == 0:
        print(f"done: start `claude`; memory of {settings.entity!r} is injected at every session start. "
              f"Undo: pps hooks uninstall; claude mcp remove {shlex.quote(MCP_NAME.format(entity=settings.entity))}")
    return code

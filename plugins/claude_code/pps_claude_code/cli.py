"""``pps hooks``, ``pps hook``, ``pps import``, ``pps doctor`` and ``pps setup claude-code``."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def other_hosts() -> list[str]:
    """The hosts of the hook core installed beside Claude Code (pps-codex, pps-gemini, pps-copilot, ...)."""
    try:
        from pps_hooks.hosts import host_names
    except ImportError:
        return []
    return [name for name in host_names() if name != "claude-code"]


def add_commands(cli) -> None:
    hosts = other_hosts()
    p = cli.add("hooks", cmd_hooks, help="agent hosts' hooks (Claude Code by default): install, uninstall, status")
    p.add_argument("action", choices=["install", "uninstall", "status", "stop"],
                   help="install: merge the hooks into Claude Code's settings.json; uninstall: remove them; "
                        "status: what is installed and what the hooks did last; stop: stop the server the "
                        "hooks started (the next hook starts it again)")
    cli.entity_args(p)
    p.add_argument("--print", action="store_true", dest="print_only", help="install: print the JSON, write nothing")
    p.add_argument("--settings", help="Claude Code settings file (default: ~/.claude/settings.json; a project's "
                                      ".claude/settings.json works too)")
    p.add_argument("--prompt-recall", action="store_true", help="install: inject relevant memories on every prompt")
    p.add_argument("--host", default="claude-code", choices=["claude-code", *hosts],
                   help="install/uninstall: the host whose hooks to change (default claude-code); status shows "
                        "every host")
    p.add_argument("--config", help="install/uninstall with --host: the host's hook config file (default: the "
                                    "host's user-level file)")

    p = cli.add("hook", cmd_hook, help="run one Claude Code hook (reads the event JSON on stdin; always exits 0)")
    p.add_argument("event", help="SessionStart, UserPromptSubmit, Stop, PreCompact or SessionEnd")
    cli.entity_args(p)
    p.add_argument("--recall", action="store_true", help="UserPromptSubmit: inject the memories relevant to the prompt")

    imports = cli.group("import", help="import history into an entity (idempotent: importing twice adds nothing)",
                        metavar="FORMAT")
    p = imports.add("claude-code", cmd_import, help="Claude Code transcripts: one .jsonl or a directory of them")
    p.add_argument("path", help="a transcript .jsonl or a directory of them")
    cli.entity_args(p)
    p.add_argument("--user-name", help="author of the human's prompts (default: the configured name)")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")
    p.set_defaults(format="claude-code")
    for name in hosts:
        p = imports.add(name, cmd_import, help=f"{name} transcripts: one file or a directory of them (default: where "
                                                "the host keeps them)")
        p.add_argument("path", nargs="?", help="a transcript or a directory of them")
        cli.entity_args(p)
        p.add_argument("--user-name", help="author of the human's prompts (default: the configured name)")
        p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")
        p.set_defaults(format=name)
    p = imports.add("jsonl", cmd_import, help="one JSON turn per line (content, author_name, channel, created_at, ...)")
    p.add_argument("path", help="a .jsonl file")
    cli.entity_args(p)
    p.add_argument("--channel", help="channel for lines that name none")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")
    p.set_defaults(format="jsonl")

    p = cli.add("doctor", cmd_doctor, help="check the whole install: entity, plugins, stores, model, server, hooks, MCP")
    cli.entity_args(p)
    p.add_argument("--settings", help="Claude Code settings file to check (default: ~/.claude/settings.json)")

    p = cli.add("setup", cmd_setup, help="set PPS up for a host in one step: pps setup claude-code --entity NAME")
    p.add_argument("host", choices=["claude-code", *hosts])
    cli.entity_args(p)
    p.add_argument("--user-name", help="your name, as your prompts are stored (default: $USER)")
    p.add_argument("--settings", help="Claude Code settings file (default: ~/.claude/settings.json)")
    p.add_argument("--no-mcp", action="store_true", help="do not register the MCP server")
    p.add_argument("--tools", default=None, help="MCP tool profile: essential, all, or a comma list "
                                                 "(default: [mcp] tools of pps.toml, itself essential by default)")
    p.add_argument("--prompt-recall", action="store_true", help="inject relevant memories on every prompt")
    p.add_argument("--config", help="another host's hook config file (default: the host's user-level file)")


def _settings(args):
    from pps_core.settings import load_settings

    return load_settings(args.entity, args.home, must_exist=True)


def chosen_entity(args) -> None:
    """No ``--entity``/``--home`` (nor ``$PPS_ENTITY``/``$PPS_HOME``): the entity ``pps setup claude-code``
    recorded, as the hooks themselves use it."""
    import os

    from .hook import default_entity

    if not (getattr(args, "entity", None) or getattr(args, "home", None) or os.environ.get("PPS_ENTITY")
            or os.environ.get("PPS_HOME")):
        args.entity = default_entity()


def _settings_file(args) -> Path:
    from .install import settings_file

    return settings_file(getattr(args, "settings", None))


def cmd_hooks(args) -> int:
    from . import install

    chosen_entity(args)
    if getattr(args, "host", "claude-code") != "claude-code" and args.action in ("install", "uninstall"):
        from pps_hooks import commands
        from pps_hooks.hosts import get_host

        host = get_host(args.host)
        return commands.uninstall(host, args) if args.action == "uninstall" else commands.setup(host, args)

    if args.action == "uninstall":
        path = _settings_file(args)
        removed = install.uninstall(path)
        print(f"removed {removed} PPS hook{'s' if removed != 1 else ''} from {path}" if removed
              else f"no PPS hooks in {path}; nothing changed")
        from .checks import claude_json
        from .setup import unregister_mcp

        gone = unregister_mcp()  # what `pps setup` registered beside the hooks
        if gone:
            print(f"removed the MCP server{'s' if len(gone) > 1 else ''} {', '.join(gone)} `pps setup` registered "
                  f"({claude_json()})")
        return 0
    if args.action == "status":
        from .status import print_status

        return print_status(args)
    if args.action == "stop":
        from .server import stop_server

        settings = _settings(args)
        print(stop_server(settings))
        return 0
    settings = _settings(args)
    config = install.hooks_config(settings.entity, Path(settings.home), prompt_recall=args.prompt_recall)
    if args.print_only:
        print(json.dumps({"hooks": config}, indent=2))
        return 0
    path = install.install(_settings_file(args), config)
    from pps_hooks.logbook import log_path

    print(f"installed PPS hooks for entity {settings.entity!r} in {path}")
    print(f"  events: {', '.join(config)}; see what they do with `pps hooks status`; log: {log_path(settings.home)}")
    return 0


def cmd_hook(args) -> int:
    from .hooks import run

    return run(args.event, args.entity, args.home, recall=args.recall)


def _client(args, settings):
    from pps_core.client import EntityClient

    client = EntityClient(settings)
    client.__enter__()
    if getattr(args, "local", False):
        client.mode = "direct"
    return client


def cmd_import(args) -> int:
    from . import importer
    from .config import assistant_name, user_name

    settings = _settings(args)
    path = Path(args.path or ".").expanduser()
    if args.path and not path.exists():
        print(f"pps: error: {path}: no such file or directory", file=sys.stderr)
        return 2
    try:
        if args.format not in ("jsonl", "claude-code"):
            from pps_hooks.commands import transcript_turns
            from pps_hooks.hosts import get_host

            turns, files, path = transcript_turns(get_host(args.format), settings, args.path,
                                                  getattr(args, "user_name", None))
        elif args.format == "jsonl":
            turns = list(importer.read_jsonl(path, getattr(args, "channel", None)))
        else:
            turns = list(importer.claude_code_turns(path, assistant_name(settings),
                                                    getattr(args, "user_name", None) or user_name(settings)))
    except ValueError as exc:
        print(f"pps: error: {exc}", file=sys.stderr)
        return 2
    with _client(args, settings) as client:
        report = importer.import_turns(client, turns, f"import {path.name}")
    from pps_core.cli_text import new_of_read

    new = new_of_read(report["added"], report["read"], report.get("forgotten") or 0)
    print(f"read {report['read']} turns from {path}; {new}; "
          f"entity {settings.entity!r} now holds {report['total'] if report['total'] is not None else '?'} "
          f"turns (via {report['via']})")
    return 0


def cmd_doctor(args) -> int:
    from .doctor import run_doctor

    chosen_entity(args)
    return run_doctor(args)


def cmd_setup(args) -> int:
    from .setup import setup_claude_code

    if args.host != "claude-code":
        from pps_hooks import commands
        from pps_hooks.hosts import get_host

        return commands.setup(get_host(args.host), args)
    return setup_claude_code(args)

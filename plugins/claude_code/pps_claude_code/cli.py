"""``pps hooks``, ``pps hook`` and ``pps import``: living with an entity in Claude Code day to day."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_commands(cli) -> None:
    p = cli.add("hooks", cmd_hooks, help="Claude Code hooks: capture every turn, inject memory at session start")
    p.add_argument("action", choices=["install"], help="install: merge the hooks into Claude Code's settings.json")
    cli.entity_args(p)
    p.add_argument("--print", action="store_true", dest="print_only", help="print the JSON instead of writing it")
    p.add_argument("--settings", default="~/.claude/settings.json",
                   help="Claude Code settings file (default: ~/.claude/settings.json; a project's "
                        ".claude/settings.json works too)")
    p.add_argument("--prompt-recall", action="store_true", help="also inject a short recall on every prompt")

    p = cli.add("hook", cmd_hook, help="run one Claude Code hook (reads the event JSON on stdin; always exits 0)")
    p.add_argument("event", help="SessionStart, UserPromptSubmit, Stop or SessionEnd")
    cli.entity_args(p)
    p.add_argument("--recall", action="store_true", help="UserPromptSubmit: inject a short recall for the prompt")

    p = cli.add("import", cmd_import, help="import turns: Claude Code transcripts or JSONL (idempotent)")
    p.add_argument("format", choices=["claude-code", "jsonl"])
    p.add_argument("path", help="a transcript .jsonl or a directory of them (claude-code); a .jsonl file (jsonl)")
    cli.entity_args(p)
    p.add_argument("--user-name", help="author of the human's prompts (claude-code; default [claude_code] user_name)")
    p.add_argument("--channel", help="channel for lines that name none (jsonl)")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")


def _settings(args):
    from pps_core.settings import load_settings

    return load_settings(args.entity, args.home, must_exist=True)


def cmd_hooks(args) -> int:
    from . import hooks

    settings = _settings(args)
    config = hooks.hooks_config(settings.entity, Path(settings.home), prompt_recall=args.prompt_recall)
    if args.print_only:
        print(json.dumps({"hooks": config}, indent=2))
        return 0
    path = hooks.install(Path(args.settings), config)
    print(f"installed PPS hooks for entity {settings.entity!r} in {path}")
    print(f"  events: {', '.join(config)}; failures are logged to {hooks.log_path(settings.home)}")
    return 0


def cmd_hook(args) -> int:
    from . import hooks

    return hooks.run(args.event, args.entity, args.home, recall=args.recall)


def _client(args, settings):
    from pps_core.client import EntityClient

    client = EntityClient(settings)
    client.__enter__()
    if getattr(args, "local", False):
        client.mode = "direct"
    return client


def cmd_import(args) -> int:
    from . import importer
    from .hooks import ClaudeCodeSettings

    settings = _settings(args)
    path = Path(args.path).expanduser()
    if not path.exists():
        print(f"pps: error: {path}: no such file or directory", file=sys.stderr)
        return 2
    try:
        if args.format == "jsonl":
            turns = list(importer.read_jsonl(path, args.channel))
        else:
            cc = settings.plugin_settings(ClaudeCodeSettings, "claude_code")
            turns = list(importer.claude_code_turns(path, cc.assistant_name or settings.entity,
                                                    args.user_name or cc.user_name))
    except ValueError as exc:
        print(f"pps: error: {exc}", file=sys.stderr)
        return 2
    with _client(args, settings) as client:
        report = importer.import_turns(client, turns, f"import {path.name}")
    added = "?" if report["added"] is None else report["added"]
    print(f"read {report['read']} turns from {path}; {added} new (the rest were already stored); "
          f"entity {settings.entity!r} now holds {report['total'] if report['total'] is not None else '?'} "
          f"turns (via {report['via']})")
    return 0

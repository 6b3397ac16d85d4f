"""``pps import chatgpt|claude-ai|pps`` and ``pps export``."""

from __future__ import annotations

import sys
from pathlib import Path


def add_commands(cli) -> None:
    imports = cli.group("import", help="import history into an entity (idempotent: importing twice adds nothing)",
                        metavar="FORMAT")
    for kind, service in (("chatgpt", "ChatGPT"), ("claude-ai", "claude.ai")):
        p = imports.add(kind, cmd_import_chat, help=f"a {service} data export: the .zip, or conversations.json")
        p.add_argument("path", help="the export .zip as downloaded, or the conversations.json in it")
        cli.entity_args(p)
        p.add_argument("--user-name", help="author of your messages (default: user_name of pps.toml, else $USER)")
        p.add_argument("--assistant-name", help=f"author of {service}'s replies (default: display_name of pps.toml, "
                                                "else the entity's name)")
        p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")
        p.set_defaults(format=kind)
    p = imports.add("pps", cmd_import_pps, help="a directory written by `pps export`, into a fresh entity")
    p.add_argument("path", help="the export directory (with manifest.json)")
    cli.entity_args(p)
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")

    p = cli.add("export", cmd_export, help="write the entity's memory as open files: JSONL, markdown, JSON")
    p.add_argument("path", help="a new (or empty) directory to write")
    cli.entity_args(p)
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")


def _settings(args):
    from pps_core.settings import load_settings

    return load_settings(args.entity, args.home, must_exist=True)


def _client(args, settings):
    from pps_core.client import EntityClient

    client = EntityClient(settings)
    client.__enter__()
    if getattr(args, "local", False):
        client.mode = "direct"
    return client


def _fail(message: str) -> int:
    print(f"pps: error: {message}", file=sys.stderr)
    return 2


def cmd_import_chat(args) -> int:
    from . import chatgpt, claude_ai
    from .send import store_turns
    from .sources import ExportError, load_conversations
    from .turns import Speakers

    settings = _settings(args)
    path = Path(args.path).expanduser()
    if not path.is_file():
        return _fail(f"{path}: no such file")
    module, service, key = ((chatgpt, "ChatGPT", "mapping") if args.format == "chatgpt"
                            else (claude_ai, "claude.ai", "chat_messages"))
    try:
        conversations = load_conversations(path, service)
        for n, conv in enumerate(conversations):
            if key not in conv:
                raise ExportError(f"{path}: conversation {n} has no {key!r}: not a {service} export")
    except ExportError as exc:
        return _fail(str(exc))
    speakers = Speakers.from_settings(settings, args.user_name, args.assistant_name)
    turns = list(module.turns(conversations, speakers))
    with _client(args, settings) as client:
        report = store_turns(client, turns, f"import {path.name}")
    from pps_core.cli_text import new_of_read

    total = "?" if report["total"] is None else report["total"]
    channels = len({t["channel"] for t in turns})
    print(f"read {report['read']} messages in {channels} conversations ({len(conversations)} in the export) from "
          f"{path}; {new_of_read(report['added'], report['read'], report['forgotten'] or 0)}; "
          f"entity {settings.entity!r} now holds "
          f"{total} turns (via {report['via']})")
    return 0


def cmd_export(args) -> int:
    from .export import ExportRefused, export_entity

    settings = _settings(args)
    try:
        with _client(args, settings) as client:
            manifest = export_entity(client, Path(args.path).expanduser(), settings)
    except ExportRefused as exc:
        return _fail(str(exc))
    one = {"turns": "turn", "summaries": "summary", "word_photos": "word_photo", "crystals": "crystal", "facts": "fact"}
    counts = ", ".join(f"{v} {one.get(k, k) if v == 1 else k}" for k, v in manifest["counts"].items())
    print(f"exported entity {settings.entity!r} to {args.path}: {counts}")
    for note in manifest.get("skipped", []):
        print(f"  not exported: {note}")
    return 0


def cmd_import_pps(args) -> int:
    from pps_core.privacy import use_secret_scanner

    from .restore import RestoreError, adopt_settings, restore_entity

    settings = _settings(args)
    try:
        adopted, kept = adopt_settings(Path(settings.home), Path(args.path).expanduser())
    except RestoreError as exc:
        return _fail(str(exc))
    if adopted or kept:
        print("settings from the export: " + (", ".join(adopted) or "none")
              + (f" (kept this entity's own: {', '.join(kept)})" if kept else ""))
        settings = _settings(args)
    use_secret_scanner(settings.privacy.scanner())  # the files read here pass the entity's own capture filter
    try:
        with _client(args, settings) as client:
            report = restore_entity(client, Path(args.path).expanduser())
    except RestoreError as exc:
        return _fail(str(exc))
    for kind, got in report["counts"].items():
        print(f"  {kind}: {got['restored']} of {got['exported']}" + (f" ({got['note']})" if got.get("note") else ""))
    if not report["ok"]:
        return _fail(f"the restored counts differ from the export's manifest: {', '.join(report['problems'])}")
    print(f"restored {args.path} into entity {settings.entity!r}; every count matches the manifest")
    return 0

"""``pps hooks``, ``pps hook``, ``pps import`` and ``pps recap``: living with an entity day to day."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_parsers(sub, entity_args) -> None:
    p = sub.add_parser("hooks", help="Claude Code hooks: capture every turn, inject memory at session start")
    p.add_argument("action", choices=["install"], help="install: merge the hooks into Claude Code's settings.json")
    entity_args(p)
    p.add_argument("--print", action="store_true", dest="print_only", help="print the JSON instead of writing it")
    p.add_argument("--settings", default="~/.claude/settings.json",
                   help="Claude Code settings file (default: ~/.claude/settings.json; a project's "
                        ".claude/settings.json works too)")
    p.add_argument("--prompt-recall", action="store_true", help="also inject a short recall on every prompt")

    p = sub.add_parser("hook", help="run one Claude Code hook (reads the event JSON on stdin; always exits 0)")
    p.add_argument("event", help="SessionStart, UserPromptSubmit, Stop or SessionEnd")
    entity_args(p)
    p.add_argument("--recall", action="store_true", help="UserPromptSubmit: inject a short recall for the prompt")

    p = sub.add_parser("import", help="import turns: Claude Code transcripts or JSONL (idempotent)")
    p.add_argument("format", choices=["claude-code", "jsonl"])
    p.add_argument("path", help="a transcript .jsonl or a directory of them (claude-code); a .jsonl file (jsonl)")
    entity_args(p)
    p.add_argument("--user-name", help="author of the human's prompts (claude-code; default [claude_code] user_name)")
    p.add_argument("--channel", help="channel for lines that name none (jsonl)")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")

    p = sub.add_parser("recap", help="recap a session log within a token budget (default: the newest log)")
    p.add_argument("log", nargs="?", help="session log: mindloop-style JSONL or a Claude Code transcript")
    entity_args(p)
    p.add_argument("--budget", type=int, help="token budget (default [recap] budget, 1000)")
    p.add_argument("--model", help="LLM model (default [recap] model, then [llm] model)")
    p.add_argument("--summarizer", choices=["auto", "llm", "extractive"], help="default: auto")
    p.add_argument("--novelty", action="store_true", help="weigh by novelty against existing memories")
    p.add_argument("-o", "--output", help="write the recap to FILE instead of stdout")
    p.add_argument("--save", action="store_true", help="also save it as the entity's _recap.md (shown at startup)")
    p.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing (with --save or -o)")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")


def _settings(args):
    from .settings import load_settings

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
    from .client import EntityClient

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


def cmd_recap(args) -> int:
    settings = _settings(args)
    params = {"log": str(Path(args.log).expanduser().resolve()) if args.log else None, "budget": args.budget,
              "model": args.model, "summarizer": args.summarizer, "novelty": True if args.novelty else None,
              "write": args.save}
    params = {k: v for k, v in params.items() if v is not None}
    with _client(args, settings) as client:
        if client.mode == "server" or args.novelty:  # novelty searches the layers: run as the operation
            answer = client.call("session_recap", params)
        else:
            answer = _recap_here(client.memory, client._loop, params)
    if args.output:
        Path(args.output).expanduser().write_text(answer["text"] + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(answer, indent=2, ensure_ascii=False))
    elif not args.quiet and not args.output:
        print(answer["text"] or "(nothing to recap)")
    if not args.quiet:
        stats = answer.get("stats") or {}
        print(f"recap of {answer['source']}: ~{answer['tokens']} of {answer['budget']} tokens, "
              f"{stats.get('selected', 0)}/{stats.get('summaries', 0)} summaries ({answer.get('summarizer')}, "
              f"{stats.get('similarity')} merge){'; saved ' + answer['written'] if answer.get('written') else ''}",
              file=sys.stderr)
    return 0


def _recap_here(memory, loop, params: dict) -> dict:
    """The session_recap operation, run here with a progress bar (stderr, terminals only)."""
    from .importer import progress
    from .recap import service, store

    p = service.SessionRecapParams.model_validate(params)
    path = service.resolve_log(memory, p, trusted=True)  # this process runs as the file's reader
    rs = store.recap_settings(memory.settings)
    budget = p.budget or rs.budget
    bar = progress(None, "recap", unit="chunk")

    def tick(_stage: str, done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        recap = service.run_recap(memory, path, budget=budget, kind=p.summarizer or rs.summarizer, model=p.model,
                                  novelty=bool(p.novelty if p.novelty is not None else rs.novelty), progress=tick)
    finally:
        bar.close()
    written = str(store.save(memory.home, recap.text, path, recap.stats)) if p.write and recap.text else None
    items = [{"start": i.start.isoformat() if i.start else None, "end": i.end.isoformat() if i.end else None,
              "summary": i.summary, "score": i.score} for i in recap.items]
    return {"text": recap.text, "source": str(path), "tokens": recap.tokens, "budget": budget, "written": written,
            "summarizer": recap.stats.get("summarizer"), "stats": recap.stats, "items": items}


COMMANDS = {"hooks": cmd_hooks, "hook": cmd_hook, "import": cmd_import, "recap": cmd_recap}

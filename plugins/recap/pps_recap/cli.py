"""``pps recap [LOG]``: recap a session log from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_commands(cli) -> None:
    p = cli.add("recap", cmd_recap, help="recap a session log within a token budget (default: the newest log)")
    p.add_argument("log", nargs="?", help="session log: mindloop-style JSONL or a Claude Code transcript")
    cli.entity_args(p)
    p.add_argument("--budget", type=int, help="token budget (default [recap] budget, 1000)")
    p.add_argument("--model", help="LLM model (default [recap] model, then [llm] model)")
    p.add_argument("--summarizer", choices=["auto", "llm", "extractive"], help="default: auto")
    p.add_argument("--novelty", action="store_true", help="weigh by novelty against existing memories")
    p.add_argument("-o", "--output", help="write the recap to FILE instead of stdout")
    p.add_argument("--save", action="store_true", help="also save it as the entity's _recap.md (shown at startup)")
    p.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing (with --save or -o)")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")
    p.add_argument("--no-stores", action="store_true",
                   help="open no store (lexical merge, as beside a server; what Claude Code's SessionEnd hook runs)")


def _client(args, settings):
    from pps_core.client import EntityClient

    client = EntityClient(settings)
    client.__enter__()
    if getattr(args, "local", False):
        client.mode = "direct"
    return client


def cmd_recap(args) -> int:
    from pps_core.settings import load_settings

    settings = load_settings(args.entity, args.home, must_exist=True)
    params = {"log": str(Path(args.log).expanduser().resolve()) if args.log else None, "budget": args.budget,
              "model": args.model, "summarizer": args.summarizer, "novelty": True if args.novelty else None,
              "write": args.save}
    params = {k: v for k, v in params.items() if v is not None}
    from pps_core.forward import server_address

    if args.no_stores and args.novelty:
        print("pps recap: --novelty weighs against the stored memories: it cannot run with --no-stores",
              file=sys.stderr)
        return 2
    serving = bool(server_address(settings.home)) and not args.local
    if serving and args.novelty:  # novelty searches the layers: the server runs it (its own logs only)
        with _client(args, settings) as client:
            answer = client.call("session_recap", params)
    elif serving or args.no_stores:  # the log is read here, by the user who runs the command: any file they can read
        answer = _recap_beside_server(settings, params)
    else:
        with _client(args, settings) as client:
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


def _answer(recap, path: Path, budget: int, written: str | None) -> dict:
    items = [{"start": i.start.isoformat() if i.start else None, "end": i.end.isoformat() if i.end else None,
              "summary": i.summary, "score": i.score} for i in recap.items]
    return {"text": recap.text, "source": str(path), "tokens": recap.tokens, "budget": budget, "written": written,
            "summarizer": recap.stats.get("summarizer"), "stats": recap.stats, "items": items}


def _recap_beside_server(settings, params: dict) -> dict:
    """A server owns the stores: recap here without them (lexical merge, the configured LLM or extractive),
    reading the log as the invoking user, and save ``_recap.md`` atomically beside the server."""
    from zoneinfo import ZoneInfo

    from pps_core.progress import progress

    from . import service, store
    from .pipeline import generate
    from .summarize import make_summarizer, user_name_of

    p = service.SessionRecapParams.model_validate(params)
    path = service.resolve_log(_SettingsOnly(settings), p, trusted=True)
    rs = store.recap_settings(settings)
    budget = p.budget or rs.budget
    kind = p.summarizer or rs.summarizer
    chat = None
    if kind != "extractive":  # the entity's chat model, from its plugins (no store is opened)
        from pps_core.chat import chat_model
        from pps_core.plugins import build_plugin_manager

        chat = chat_model(build_plugin_manager(settings.plugins), settings, p.model or rs.model)
    bar = progress(None, "recap", unit="chunk")

    def tick(_stage: str, done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        recap = generate(path, budget=budget, summarizer=make_summarizer(chat, kind, user_name_of(settings)),
                         tz=ZoneInfo(settings.timezone), chunk_tokens=rs.chunk_tokens,
                         merge_threshold=rs.merge_threshold, progress=tick,
                         **store.read_plan(settings, path))
    finally:
        bar.close()
    return _answer(recap, path, budget, _save(settings, p.write, recap, path))


def _save(settings, write: bool, recap, path: Path) -> str | None:
    from . import store

    saved = (store.save(settings, recap.text, path, recap.stats, recap.start, recap.seen)
             if write and recap.text else None)
    return str(saved) if saved else None


class _SettingsOnly:
    """What ``resolve_log`` reads of a memory: its settings and home."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.home = settings.home


def _recap_here(memory, loop, params: dict) -> dict:
    """The session_recap operation, run here with a progress bar (stderr, terminals only)."""
    from pps_core.progress import progress

    from . import service, store

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
    return _answer(recap, path, budget, _save(memory.settings, p.write, recap, path))

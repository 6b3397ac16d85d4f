"""Claude Code hooks: capture every prompt and reply, inject the startup package, never break the host.

``pps hooks install`` writes the ``hooks`` table of a Claude Code settings.json; Claude Code then runs
``pps hook <Event>`` with the event's JSON on stdin. Capture reads the session transcript named in
that JSON (incrementally, from where the last hook stopped) and stores its prompts and replies with
stable ids, so a hook that fails or overlaps another loses and duplicates nothing. Whatever goes
wrong (no server, locked stores, a slow layer), a hook prints nothing it should not, exits 0 within
its deadline and writes why to ``<entity home>/logs/hooks.log``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from pps_core.settings import PluginSettings

EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")
#: Seconds Claude Code waits for each hook before it kills it (the hook's own deadline is shorter).
HOST_TIMEOUTS = {"SessionStart": 20, "UserPromptSubmit": 10, "Stop": 15, "SessionEnd": 15}
_OURS = re.compile(r"pps_core\.cli\s+hook\b|(^|[/\s])pps\s+hook\b")
_BATCH = 200


class ClaudeCodeSettings(PluginSettings):
    """``[claude_code]`` of pps.toml (env ``PPS_CLAUDE_CODE_*``): names and budgets of the hooks."""

    model_config = SettingsConfigDict(env_prefix="PPS_CLAUDE_CODE_", extra="ignore")

    user_name: str = Field(default_factory=lambda: os.environ.get("USER") or "user",
                           description="author name of the human's prompts")
    assistant_name: str | None = Field(None, description="author name of the replies; default: the entity")
    startup_budget: int = Field(9_000, ge=200, description="characters injected at SessionStart")
    prompt_recall: bool = Field(False, description="inject a short recall on every prompt")
    prompt_recall_budget: int = Field(2_000, ge=200)
    prompt_recall_limit: int = Field(3, ge=1, le=20, description="results per layer for the per-prompt recall")
    timeout_s: float = Field(8.0, gt=0, description="a hook gives up (and exits 0) after this long")
    recap_on_end: bool = Field(True, description="write _recap.md in the background at SessionEnd")


def normalize_event(name: str) -> str:
    key = name.replace("-", "").replace("_", "").lower()
    for event in EVENTS:
        if event.lower() == key:
            return event
    if key in ("prompt", "userprompt"):
        return "UserPromptSubmit"
    raise ValueError(f"unknown hook event {name!r} (known: {', '.join(EVENTS)})")


# -- install ------------------------------------------------------------------------------------


def hook_command(event: str, entity: str, home: Path, *, prompt_recall: bool = False) -> str:
    parts = [sys.executable, "-m", "pps_core.cli", "hook", event, "--entity", entity, "--home", str(home)]
    if prompt_recall and event == "UserPromptSubmit":
        parts.append("--recall")
    return " ".join(shlex.quote(p) for p in parts)


def hooks_config(entity: str, home: Path, *, prompt_recall: bool = False) -> dict[str, Any]:
    """The ``hooks`` table Claude Code reads from settings.json."""
    return {event: [{"hooks": [{"type": "command", "timeout": HOST_TIMEOUTS[event],
                                "command": hook_command(event, entity, home, prompt_recall=prompt_recall)}]}]
            for event in EVENTS}


def merge_settings(existing: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``existing`` settings with our hooks replacing any earlier PPS hooks; other hooks are kept."""
    merged = dict(existing)
    hooks = dict(merged.get("hooks") or {})
    for event, groups in config.items():
        kept = []
        for group in hooks.get(event) or []:
            inner = [h for h in group.get("hooks", []) if not _OURS.search(str(h.get("command", "")))]
            if inner:
                kept.append({**group, "hooks": inner})
        hooks[event] = kept + groups
    merged["hooks"] = hooks
    return merged


def install(settings_path: Path, config: dict[str, Any]) -> Path:
    """Merge ``config`` into a Claude Code settings file (a ``.bak`` copy of the old one is kept)."""
    from pps_core.atomic import atomic_write

    settings_path = settings_path.expanduser()
    existing: dict[str, Any] = {}
    if settings_path.exists():
        raw = settings_path.read_text()
        existing = json.loads(raw) if raw.strip() else {}
        if not isinstance(existing, dict):
            raise ValueError(f"{settings_path} does not hold a JSON object")
        (settings_path.parent / (settings_path.name + ".bak")).write_text(raw)
    settings_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(settings_path, json.dumps(merge_settings(existing, config), indent=2) + "\n")
    return settings_path


# -- run ----------------------------------------------------------------------------------------


def log_path(home: Path) -> Path:
    return Path(home) / "logs" / "hooks.log"


def log(home: Path, message: str) -> None:
    """Append one line to the hooks log (kept under 1 MB). Never raises."""
    try:
        path = log_path(home)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.exists() and path.stat().st_size > 1_000_000:
            path.replace(path.with_suffix(".log.1"))
        with path.open("a") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} pid={os.getpid()} {message}\n")
    except OSError:
        pass


def _state_path(home: Path, session: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session)[:120] or "unknown"
    return Path(home) / "hooks" / "claude-code" / f"{safe}.json"


def sync_transcript(client, settings, cc: ClaudeCodeSettings, payload: dict[str, Any]) -> int:
    """Store the turns the transcript gained since the last hook of this session; returns how many."""
    from .transcripts import transcript_turns

    transcript = payload.get("transcript_path")
    session = str(payload.get("session_id") or "unknown")
    if not transcript or not Path(transcript).expanduser().is_file():
        return 0
    transcript = str(Path(transcript).expanduser())
    state_file = _state_path(settings.home, session)
    state = {}
    if state_file.exists():
        try:
            state = json.loads(state_file.read_text())
        except ValueError:
            state = {}
    offset = state.get("offset", 0) if state.get("transcript") == transcript else 0
    if offset > Path(transcript).stat().st_size:  # rewritten transcript: start over (ids dedupe)
        offset = 0
    turns, end = transcript_turns(Path(transcript), entity=cc.assistant_name or settings.entity,
                                  user_name=cc.user_name, offset=offset, session_id=session)
    for i in range(0, len(turns), _BATCH):
        client.call("store_messages", {"messages": turns[i:i + _BATCH]})
    if end != offset or not state_file.exists():
        from pps_core.atomic import atomic_write

        state_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(state_file, json.dumps({"transcript": transcript, "offset": end, "session_id": session,
                                             "updated": time.time()}))
    return len(turns)


def _refresh_recap(client, settings, session: str) -> None:
    """After a crash the last session left no recap: make one (extractive, fast) before the startup recall."""
    if "recap" not in settings.plugins:
        return
    try:
        from pps_recap import store  # the recap plugin is optional
    except ImportError:
        return
    try:
        newest = store.newest_log(settings, exclude_session=session)
        if newest is not None and store.is_stale(settings.home, newest):
            client.call("session_recap", {"log": str(newest), "fast": True, "write": True})
            log(settings.home, f"SessionStart: recap regenerated from {newest}")
    except Exception as exc:  # noqa: BLE001 - the startup package matters more than the recap
        log(settings.home, f"SessionStart: recap not regenerated: {type(exc).__name__}: {exc}")


def _context(event: str, text: str) -> str:
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def handle(event: str, payload: dict[str, Any], settings, *, recall: bool = False) -> str | None:
    """Do the work of one hook; returns what to print on stdout (JSON for Claude Code) or None."""
    from pps_core.client import EntityClient

    cc = settings.plugin_settings(ClaudeCodeSettings, "claude_code")
    session = str(payload.get("session_id") or "unknown")
    channel = f"terminal:{session}"
    out = None
    with EntityClient(settings) as client:
        stored = sync_transcript(client, settings, cc, payload)
        if event == "SessionStart":
            _refresh_recap(client, settings, session)
            answer = client.call("ambient_recall", {"context": "startup", "budget": cc.startup_budget,
                                                    "channel": channel})
            out = _context(event, answer.get("text", ""))
        elif event == "UserPromptSubmit" and (recall or cc.prompt_recall) and str(payload.get("prompt", "")).strip():
            answer = client.call("ambient_recall", {"context": str(payload["prompt"])[:20_000],
                                                    "limit_per_layer": cc.prompt_recall_limit,
                                                    "budget": cc.prompt_recall_budget, "channel": channel})
            out = _context(event, answer.get("text", ""))
        mode = client.mode
    log(settings.home, f"{event} session={session} stored={stored} via={mode}")
    if event == "SessionEnd" and cc.recap_on_end and payload.get("transcript_path"):
        _spawn_recap(settings, str(payload["transcript_path"]))
    return out


def _spawn_recap(settings, transcript: str) -> None:
    """Write the session's recap in a detached process: summarizing may outlive the hook."""
    import subprocess

    cmd = [sys.executable, "-m", "pps_core.cli", "recap", transcript, "--entity", settings.entity,
           "--home", str(settings.home), "--save", "--quiet"]
    with log_path(settings.home).open("a") as err:
        subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                         start_new_session=True, close_fds=True)


def run(event_name: str, entity: str | None, home: str | None, *, recall: bool = False,
        stdin=None, stdout=None) -> int:
    """Entry point of ``pps hook``: always exits 0; failures and timeouts are logged, not raised."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    settings = None
    try:
        from pps_core.settings import load_settings

        settings = load_settings(entity, home, must_exist=True)
        raw = stdin.read()
        payload = json.loads(raw) if raw.strip() else {}
        if not isinstance(payload, dict):
            raise ValueError("hook input is not a JSON object")
        event = normalize_event(event_name or payload.get("hook_event_name", ""))
        cc = settings.plugin_settings(ClaudeCodeSettings, "claude_code")
        os.environ.setdefault("PPS_FORWARD_TIMEOUT", str(cc.timeout_s))
    except Exception as exc:  # a bad install or bad input must not break the host either
        if settings is not None:
            log(settings.home, f"{event_name}: cannot start: {type(exc).__name__}: {exc}")
        return 0
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["out"] = handle(event, payload, settings, recall=recall)
        except BaseException as exc:  # noqa: BLE001 - everything is logged, nothing reaches the host
            result["error"] = f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"

    worker = threading.Thread(target=work, name="pps-hook", daemon=True)
    worker.start()
    worker.join(cc.timeout_s)
    if worker.is_alive():
        log(settings.home, f"{event}: gave up after {cc.timeout_s:g}s (PPS slow or stuck); nothing injected")
        stdout.flush()
        os._exit(0)  # the stuck worker must not hold the host
    if "error" in result:
        log(settings.home, f"{event}: failed: {result['error']}")
    elif result.get("out"):
        stdout.write(result["out"] + "\n")
        stdout.flush()
    return 0

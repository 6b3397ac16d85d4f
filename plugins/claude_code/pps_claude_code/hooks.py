"""Claude Code hooks: capture every prompt and reply, inject memory, never break the host, never fail silently.

Claude Code runs ``python -m pps_claude_code.hook <Event>`` (see :mod:`.install`) with the event's JSON
on stdin. Capture reads the session transcript named in that JSON from where the last hook of the
session stopped (under a per-session lock, so overlapping hooks never send a turn twice) and stores
its prompts and replies with stable ids. SessionStart (also after ``/compact``) injects the startup
package; UserPromptSubmit can inject the memories relevant to the prompt; PreCompact saves everything
the transcript holds before Claude Code compacts it; SessionEnd saves the last turns and writes the
session's recap (a short-lived process that opens no store). The first hook starts the entity's server
when none runs (:mod:`.server`), so later hooks are quick forwards; SessionEnd never starts one (it would
serve nobody and live on idle).

Whatever goes wrong (no entity, a dead server, locked stores, a slow layer), a hook exits 0 within
its deadline, writes why to ``<home>/logs/hooks.log`` (0600) and, where memory should have been
injected, tells the user in one line (the hook output's ``systemMessage``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pps_hooks.logbook import failure_notice, log, log_path, record

from .config import ClaudeCodeSettings, assistant_name, cc_settings, user_name
from .install import normalize_event
from .recall_view import relevant_memories

#: Events whose job is to put memory into the conversation: a failure there is shown to the user.
INJECTING = ("SessionStart", "PreCompact")
#: Events the user waits on: when no server answers yet they answer from a glance (``[claude_code] glance``).
GLANCING = ("SessionStart", "UserPromptSubmit")


def sync_transcript(client, settings, cc: ClaudeCodeSettings, payload: dict[str, Any]) -> int:
    """Store the turns the transcript gained since the last hook of this session; returns how many."""
    from .fastpath import sync_turns

    return sync_turns(client, Path(settings.home), assistant_name(settings, cc), user_name(settings, cc), payload)


def _refresh_recap(client, settings, session: str) -> None:
    """After a crash the last session left no recap: make one (extractive, fast) before the startup recall."""
    if "recap" not in settings.plugins:
        return
    try:  # the recap plugin decides what is stale (its files); the newest log may be this plugin's transcripts
        answer = client.call("session_recap", {"exclude_session": session, "if_stale": True, "fast": True,
                                               "write": True})
        if answer.get("written"):
            log(settings.home, f"SessionStart: recap regenerated from {answer.get('source')}")
    except Exception as exc:  # noqa: BLE001 - the startup package matters more than the recap
        log(settings.home, f"SessionStart: recap not regenerated: {type(exc).__name__}: {exc}")


def context_output(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def handle(event: str, payload: dict[str, Any], settings, cc: ClaudeCodeSettings, *, recall: bool = False,
           deadline: float) -> dict[str, Any] | None:
    """Do the work of one hook; returns the JSON to print for Claude Code, or None."""
    from pps_core.client import EntityClient
    from pps_core.owner import read_owner

    from .server import ensure_server

    if cc.server_url:  # a server elsewhere (a fleet): forward, open nothing, start nothing
        return fleet_handle(event, payload, settings, cc, recall=recall)
    session = str(payload.get("session_id") or "unknown")
    channel = f"terminal:{session}"
    if event in GLANCING and cc.glance:
        from .server import COLD, server_state

        address, how = server_state(settings, cc)
        if address is None and (how == COLD or "starting" in how):
            if how == COLD:  # started once the answer is out (see run), even if the glance fails
                _START_AFTER.append(settings)
            return glance(event, payload, settings, cc, recall=recall, start=how == COLD, how=how)
    if event == "SessionEnd":
        if cc.recap_on_end and payload.get("transcript_path"):
            _spawn_recap(settings, str(payload["transcript_path"]))  # reads the transcript, not the stores
        if read_owner(Path(settings.home)) is None:  # the last hook: a server started now would serve nobody
            address, how = None, "none running, and SessionEnd starts none"
        else:  # one runs or is starting: wait for it
            address, how = ensure_server(settings, cc, deadline - min(2.0, cc.timeout_s / 3))
    else:
        address, how = ensure_server(settings, cc, deadline - min(2.0, cc.timeout_s / 3))
    if address is None and "still starting" in how:
        from pps_core.errors import Unavailable

        later = ("this session's last turns were not saved" if event == "SessionEnd" else
                 "memory will be there at the next prompt (started cold, it loads its models once)")
        raise Unavailable(f"{how}; {later}; see {Path(settings.home) / 'logs' / 'server.log'}")
    if address is None and not how.startswith(("autostart off", "pps-http is not")):
        log(settings.home, f"{event}: no server ({how}); opening the stores here")
    out = None
    with EntityClient(settings) as client:
        stored = sync_transcript(client, settings, cc, payload)
        if stored or event in ("Stop", "PreCompact", "SessionEnd"):
            record(settings.home, "capture", event=event, session=session, turns=stored, via=client.mode)
        if event == "SessionStart":
            _refresh_recap(client, settings, session)
            answer = client.call("ambient_recall", {"context": "startup", "budget": cc.startup_budget,
                                                    "channel": channel})
            text = answer.get("text", "")
            out = context_output(event, text)
            record(settings.home, "injection", event=event, source=payload.get("source"), chars=len(text))
        elif event == "UserPromptSubmit" and (recall or cc.prompt_recall) and str(payload.get("prompt", "")).strip():
            prompt = str(payload["prompt"])[:20_000]
            answer = client.call("ambient_recall", {"context": prompt, "limit_per_layer": cc.prompt_recall_limit,
                                                    "channel": channel})
            text = relevant_memories(answer, prompt, cc.prompt_recall_min_score, cc.prompt_recall_budget)
            if text:
                out = context_output(event, text)
                record(settings.home, "injection", event=event, chars=len(text))
        mode = client.mode
    log(settings.home, f"{event} session={session} new_turns={stored} via={mode}"
                       + (f" server={how}" if how == "started" else ""))
    return out


def fleet_handle(event: str, payload: dict[str, Any], settings, cc: ClaudeCodeSettings, *,
                 recall: bool) -> dict[str, Any] | None:
    """``[claude_code] server_url``: the hook's work sent to that server with this home's token (the fast path's
    :func:`.fastpath._handle`, reached here when the fast path declined, e.g. settings only the full loader reads)."""
    from pps_core.auth import read_token

    from .fastpath import DEFAULTS, Light, Remote, _handle

    light = Light(Path(settings.home), settings.entity, {"plugins": list(settings.plugins)},
                  {k: getattr(cc, k) for k in DEFAULTS})
    light.user_name, light.assistant_name = user_name(settings, cc), assistant_name(settings, cc)
    remote = Remote(str(cc.server_url), read_token(Path(settings.home)), cc.timeout_s)
    return _handle(remote, light, event, payload, recall, via="fleet")


def glance(event: str, payload: dict[str, Any], settings, cc: ClaudeCodeSettings, *, recall: bool,
           start: bool, how: str = "") -> dict[str, Any] | None:
    """A cold SessionStart or UserPromptSubmit: answer at once from the layers that open at a glance (read-only,
    cheap: ``pps_core.Memory(glance=True)``), saying which are still warming up; the server starts after the
    answer is out when ``start`` (:func:`handle` queues it, :func:`run` starts it). Nothing is stored here: the transcript's new turns stay
    where the session's cursor is, and the next hook sends them to the warm server."""
    import asyncio

    from pps_core.memory import Memory

    session = str(payload.get("session_id") or "unknown")
    channel = f"terminal:{session}"
    prompt = str(payload.get("prompt") or "")[:20_000]
    wanted = event == "SessionStart" or ((recall or cc.prompt_recall) and prompt.strip())
    out: dict[str, Any] | None = None
    warming: list[str] = []
    if wanted:
        params = ({"context": "startup", "budget": cc.startup_budget, "channel": channel} if event == "SessionStart"
                  else {"context": prompt, "limit_per_layer": cc.prompt_recall_limit, "channel": channel})

        async def recall_once() -> dict[str, Any]:
            async with Memory(settings, glance=True) as memory:
                return await memory.call("ambient_recall", params)

        answer = asyncio.run(recall_once())
        warming = [s["layer"] for s in answer.get("layers") or [] if s.get("status") == "warming"]
        if event == "SessionStart":
            text = answer.get("text", "")
            out = context_output(event, text)
            record(settings.home, "injection", event=event, source=payload.get("source"), chars=len(text))
        else:
            text = relevant_memories(answer, prompt, cc.prompt_recall_min_score, cc.prompt_recall_budget,
                                     warming=[s.get("detail") or s["layer"] for s in answer.get("layers") or []
                                              if s.get("status") == "warming"])
            if text:
                out = context_output(event, text)
                record(settings.home, "injection", event=event, chars=len(text))
    log(settings.home, f"{event} session={session} new_turns=0 via=glance"
                       + (f" warming={','.join(warming)}" if warming else "")
                       + (" (turns wait for the server)" if payload.get("transcript_path") else "")
                       + ("" if start else f"; {how}"))
    return out


#: Settings of entities whose server a glance asked to start once its answer is out (see :func:`run`).
_START_AFTER: list[Any] = []


def _spawn_recap(settings, transcript: str) -> None:
    """Write the session's recap in a detached process (summarizing may outlive the hook) that opens no store,
    so the next session's first hook never waits for it. Isolated from the project the hook runs in
    (:mod:`pps_hooks.isolated`): ``-I``, in the entity's home."""
    import importlib.util
    import subprocess

    if "recap" not in settings.plugins or importlib.util.find_spec("pps_recap") is None:
        return
    from pps_hooks.isolated import python
    from pps_hooks.logbook import private_append

    cmd = python("-m", "pps_core.cli", "recap", os.path.abspath(os.path.expanduser(transcript)),
                 "--entity", settings.entity, "--home", str(settings.home), "--save", "--quiet", "--no-stores")
    private_append(log_path(settings.home), "")  # exists, 0600, before the child appends to it
    err = os.open(log_path(settings.home), os.O_WRONLY | os.O_APPEND)
    try:
        subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                         start_new_session=True, close_fds=True, cwd=settings.home)
    finally:
        os.close(err)


def _fallback_log(message: str) -> None:
    """No entity home to log in: ``$PPS_ROOT/logs/hooks.log``."""
    from pps_core.settings import pps_root

    log(pps_root(), message)


def _failure_notice(event: str, settings, session: str, reason: str, *, injecting: bool) -> dict[str, Any] | None:
    return failure_notice(settings.home if settings is not None else None, event, session, reason,
                          injecting=injecting)


def run(event_name: str, entity: str | None, home: str | None, *, recall: bool = False,
        stdin=None, stdout=None) -> int:
    """Entry point of a hook: always exits 0; failures are logged, recorded and, where it matters, shown."""
    started = time.monotonic()
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    settings = None
    event = event_name
    session = "unknown"

    from pps_hooks.runner import emitter

    emit = emitter(stdout)
    try:
        raw = stdin.read()
        try:
            payload = json.loads(raw) if raw.strip() else {}
        except ValueError:
            payload = None
        try:
            event = normalize_event(event_name or (payload or {}).get("hook_event_name", ""))
        except ValueError:
            event = event_name
        if not isinstance(payload, dict):
            raise ValueError("hook input is not a JSON object")
        session = str(payload.get("session_id") or "unknown")
        event = normalize_event(event_name or payload.get("hook_event_name", ""))
        from pps_core.settings import load_settings

        settings = load_settings(entity, home, must_exist=True)
        cc = cc_settings(settings)
        os.environ.setdefault("PPS_FORWARD_TIMEOUT", str(cc.timeout_s))
    except Exception as exc:  # a bad install or bad input must not break the host either
        reason = getattr(exc, "message", None) or str(exc)
        line = f"{event}: cannot start: {type(exc).__name__}: {reason}"
        if settings is not None or (home and Path(home).is_dir()):
            log(settings.home if settings is not None else Path(home), line)
        else:
            _fallback_log(line)
        if settings is not None:
            record(settings.home, "error", event=event, message=reason)
        emit(_failure_notice(event, settings, session, reason, injecting=event in INJECTING or recall))
        return 0
    # SessionStart may have to start the server cold (models, graph): it may wait longer, within the host's 20 s
    timeout = (max(cc.timeout_s, cc.server_start_s) if event == "SessionStart" and not cc.server_url
               else cc.timeout_s)
    injecting = event in INJECTING or (event == "UserPromptSubmit" and (recall or cc.prompt_recall))
    from pps_hooks.runner import guarded

    guarded(lambda: handle(event, payload, settings, cc, recall=recall, deadline=started + timeout),
            home=Path(settings.home), event=event, session=session, started=started, timeout=timeout,
            injecting=injecting, stdout=stdout,
            after=lambda: _start_queued(event, cc))  # a glance answered (or stuck): the server starts now
    return 0


def _start_queued(event: str, cc: ClaudeCodeSettings) -> None:
    from .server import start_detached

    while _START_AFTER:
        settings = _START_AFTER.pop()
        try:
            how = start_detached(settings, cc)
        except Exception as exc:  # noqa: BLE001 - logged; the next hook tries again
            how = f"not started: {type(exc).__name__}: {exc}"
        log(settings.home, f"{event}: server {how}")

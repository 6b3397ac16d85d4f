"""One hook of a host (:class:`pps_hooks.host.Host`): capture the turns the event brings, once each; at a
``start`` moment inject the startup package in the host's shape within its limit. Runs through
:func:`pps_hooks.runner.guarded` (exit 0, within ``[hooks] timeout_s``, failures logged and shown).

The entity is reached through :class:`pps_core.client.EntityClient`: the server that owns it when one runs
(forwarded), else the stores opened here for the hook's life.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from pps_core.settings import PluginSettings

from .host import Host, Names, fit
from .logbook import failure_text, log, private_dirs, record, replace_private
from .runner import emitter, guarded

BATCH = 200


class HooksSettings(PluginSettings):
    """``[hooks]`` of pps.toml (env ``PPS_HOOKS_*``): what every host but Claude Code (``[claude_code]``) reads."""

    model_config = SettingsConfigDict(env_prefix="PPS_HOOKS_", extra="ignore")

    startup_budget: int = Field(9_000, ge=200, description="characters of the startup package injected at a "
                                                           "session's start (never more than the host takes)")
    timeout_s: float = Field(8.0, gt=0, description="a hook gives up (and exits 0) after this long")


def hooks_settings(settings) -> HooksSettings:
    return settings.plugin_settings(HooksSettings, "hooks")


def names(settings) -> Names:
    """The speakers' names (:class:`pps_hooks.host.Names`) from the entity-wide ``user_name`` and ``display_name``."""
    extra = settings.model_extra or {}

    def text(value: Any) -> str | None:
        return value.strip() if isinstance(value, str) and value.strip() else None

    user = text(extra.get("user_name")) or os.environ.get("USER") or "user"
    assistant = text(extra.get("display_name")) or settings.entity[:1].upper() + settings.entity[1:]
    return Names(user.strip(), assistant.strip())


def state_path(home: Path, host: Host, session: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session)[:120] or "unknown"
    return Path(home) / "hooks" / host.name / f"{safe}.json"


def capture(client, home: Path, host: Host, event: str, payload: dict[str, Any], who: Names) -> int:
    """Store the turns ``event`` brings that this session's state has not seen; returns how many. Under a
    per-session lock, so overlapping hooks never send a turn twice; the state moves on only once stored."""
    session = host.session_id(payload)
    state_file = state_path(home, host, session)
    private_dirs(state_file.parent)
    lock = os.open(state_file.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = json.loads(state_file.read_text())
            state = state if isinstance(state, dict) else {}
        except (OSError, ValueError):
            state = {}
        turns, new_state = host.new_turns(event, payload, state, who)
        for i in range(0, len(turns), BATCH):
            client.call("store_messages", {"messages": turns[i:i + BATCH]})
        if new_state != state or not state_file.exists():
            replace_private(state_file, json.dumps({**new_state, "session_id": session, "updated": time.time()}))
        return len(turns)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)


def startup(settings, params: dict[str, Any], client) -> dict[str, Any]:
    """The startup package: from the server when one owns the entity, else at a glance (the layers that open at
    once, read-only beside any writer: turns, crystals, the recap; the others named as warming up), so a session's
    start never waits for models to load (``pps serve http`` for the whole package without a server's wait)."""
    if client.mode == "server":
        return dict(client.call("ambient_recall", params))
    import asyncio

    from pps_core.memory import Memory

    async def once() -> dict[str, Any]:
        async with Memory(settings, glance=True) as memory:
            return dict(await memory.call("ambient_recall", params))

    return asyncio.run(once())


def handle(host: Host, event: str, payload: dict[str, Any], settings, hs: HooksSettings) -> dict[str, Any] | None:
    from pps_core.client import EntityClient

    home = Path(settings.home)
    moment = host.events[event]
    session = host.session_id(payload)
    out = None
    stored = 0
    with EntityClient(settings) as client:
        if moment != "start" or client.mode == "server":  # a start without a server stores nothing: no store opens
            stored = capture(client, home, host, event, payload, names(settings))
        if stored or moment in ("reply", "compact", "end"):
            record(home, "capture", where=host.name, event=event, session=session, turns=stored, via=client.mode)
        if moment == "start":
            budget = max(200, min(hs.startup_budget, host.context_limit))
            answer = startup(settings, {"context": "startup", "budget": budget, "channel": f"terminal:{session}"},
                             client)
            text = fit(str(answer.get("text") or ""), host.context_limit)
            out = host.context_output(event, text)
            record(home, "injection", where=host.name, event=event, source=payload.get("source"), chars=len(text))
        mode = "glance" if moment == "start" and client.mode != "server" else client.mode
    log(home, f"{host.name} {event} session={session} new_turns={stored} via={mode}")
    return out


def run(host_name: str, event_name: str, entity: str | None, home: str | None, *, stdin, stdout) -> int:
    """Entry point of a host's hook: always exits 0; failures are logged, recorded and, where it matters, shown."""
    started = time.monotonic()
    emit = emitter(stdout)
    host: Host | None = None
    settings = None
    event, session = event_name, "unknown"
    try:
        from .hosts import get_host

        host = get_host(host_name)
        raw = stdin.read()
        try:
            payload = json.loads(raw) if raw.strip() else {}
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise ValueError("hook input is not a JSON object")
        session = host.session_id(payload)
        event = host.event_of(event_name, payload)
        from pps_core.settings import load_settings

        settings = load_settings(entity, home, must_exist=True)
        hs = hooks_settings(settings)
        os.environ.setdefault("PPS_FORWARD_TIMEOUT", str(hs.timeout_s))
    except Exception as exc:  # a bad install or bad input must not break the host either
        reason = str(getattr(exc, "message", None) or exc)
        where = host.name if host is not None else "unknown-host"
        folder = (Path(settings.home) if settings is not None else
                  Path(home) if home and Path(home).is_dir() else None)
        if folder is None:
            from pps_core.settings import pps_root

            folder = pps_root()
        log(folder, f"{host_name} {event}: cannot start: {type(exc).__name__}: {reason}")
        if settings is not None:
            record(Path(settings.home), "error", where=where, event=event, message=reason)
        text = failure_text(None, event, session, reason, injecting=True)
        emit((host.notice_output(text) if host is not None else {"systemMessage": text}) if text else None)
        return 0
    guarded(lambda: handle(host, event, payload, settings, hs), home=Path(settings.home), event=event,
            session=session, started=started, timeout=hs.timeout_s, injecting=host.events[event] == "start",
            stdout=stdout, where=host.name, notice=host.notice_output)
    return 0

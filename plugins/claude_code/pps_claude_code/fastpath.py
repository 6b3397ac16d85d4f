"""The hooks' fast path: standard library only, taken when a server already owns the entity.

Importing the PPS kernel's ``Memory`` (pydantic models, pluggy, the plugin list) costs more than the whole
hook should; with a server running the hook only has to read its settings (``pps.toml`` with tomllib, the
``PPS_CLAUDE_CODE_*`` environment), read the new lines of the transcript and make two calls on the owner's local
channel (whatever transport the owner serves). It reaches
the owner through the kernel's light modules (``pps_core.owner``, ``pps_core.auth``, ``pps_core.forward``:
standard library only, ``pps_core`` imports nothing until asked). When
anything is unusual (no server, no ``pps.toml``, settings only the full loader can resolve, input that
is not JSON), :func:`try_run` declines and the full path in :mod:`.hooks` runs instead, with the same
behaviour: the same logs, status, cursors and user-visible messages.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from pps_hooks.logbook import (
    failure_notice,
    log,
    log_path,
    private_append,
    private_dirs,
    record,
    replace_private,
)

from .recall_view import relevant_memories

EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
INJECTING = ("SessionStart", "PreCompact")
BATCH = 200
#: ``[claude_code]`` fields the hooks read, with ClaudeCodeSettings' defaults (a test keeps them equal).
DEFAULTS: dict[str, Any] = {
    "user_name": None, "assistant_name": None, "startup_budget": 9_000, "prompt_recall": False,
    "prompt_recall_budget": 2_000, "prompt_recall_limit": 3, "prompt_recall_min_score": {},
"timeout_s": 8.0, "recap_on_end": True, "server_url": None,
}
#: Environment variables only the full settings loader resolves: with one set, the fast path declines.
_FULL_ONLY = ("PPS_PLUGINS", "PPS_USER_NAME", "PPS_DISPLAY_NAME")


class Light:
    """What a hook needs of the entity's settings, read without the kernel."""

    def __init__(self, home: Path, entity: str, toml: dict[str, Any], cc: dict[str, Any]) -> None:
        self.home = home
        self.entity = entity
        self.plugins = list(toml.get("plugins") or [])
        self.recap_logs = list((toml.get("recap") or {}).get("logs") or [])
        #: The recap is kept in PostgreSQL, not in the home: the server tells whether it is stale.
        self.recap_shared = (toml.get("recap") or {}).get("store") == "postgres"
        self.cc = cc
        user = cc["user_name"] or _text(toml.get("user_name")) or os.environ.get("USER") or "user"
        self.user_name = user.strip()
        self.assistant_name = (cc["assistant_name"] or _text(toml.get("display_name"))
                               or entity[:1].upper() + entity[1:]).strip()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _coerce(default: Any, raw: str) -> Any:
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(raw)
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    if isinstance(default, dict):
        value = json.loads(raw)
        if not isinstance(value, dict):
            raise ValueError(raw)
        return value
    return raw


def light_settings(entity: str | None, home: str | None) -> Light | None:
    if any(k in os.environ for k in _FULL_ONLY):
        return None
    if home:
        path = Path(home).expanduser().resolve()
    elif os.environ.get("PPS_HOME"):
        path = Path(os.environ["PPS_HOME"]).expanduser().resolve()
    else:
        root = Path(os.environ.get("PPS_ROOT") or Path.home() / ".pps").expanduser()
        path = (root / (entity or os.environ.get("PPS_ENTITY") or "default")).resolve()
    toml = _read_toml(path)
    if toml is None:
        return None
    if "plugins" not in toml:
        return None
    name = entity or os.environ.get("PPS_ENTITY") or toml.get("entity") or path.name
    section = toml.get("claude_code") or {}
    cc: dict[str, Any] = {}
    for key, default in DEFAULTS.items():
        raw = os.environ.get("PPS_CLAUDE_CODE_" + key.upper())
        try:
            cc[key] = _coerce(default if default is not None else "", raw) if raw is not None else section.get(key, default)
        except ValueError:
            return None  # the full loader names the bad value
        if raw is not None and default is None:
            cc[key] = raw
    if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", name):
        return None
    return Light(path, name, toml, cc)


def _read_toml(home: Path) -> dict[str, Any] | None:
    """pps.toml, through a JSON copy kept beside the hooks' cursors while pps.toml is unchanged (tomllib
    costs a warm hook more than json, which it loads anyway)."""
    try:
        st = (home / "pps.toml").stat()
    except OSError:
        return None
    stamp = [st.st_mtime_ns, st.st_size, st.st_ino]
    cache = home / "hooks" / "claude-code" / "pps.toml.json"
    try:
        cached = json.loads(cache.read_text())
        if cached.get("stamp") == stamp and isinstance(cached.get("toml"), dict):
            return cached["toml"]
    except (OSError, ValueError, AttributeError):
        pass
    import tomllib

    try:
        with (home / "pps.toml").open("rb") as fh:
            toml = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    try:
        private_dirs(cache.parent)
        replace_private(cache, json.dumps({"stamp": stamp, "toml": toml}))
    except (OSError, TypeError, ValueError):  # a value JSON cannot hold (a TOML date): no copy
        pass
    return toml


#: A server that let a hook time out is not waited for again by the hooks of the next minute.
HUNG_MEMORY_S = 60.0


class Remote:
    """The entity's owner, reached through the kernel's forwarding (:func:`pps_core.forward.request`: its local
    channel, a Unix socket; a fleet's server_url over HTTPS), each wait on it bounded by the hook's ``timeout_s``."""

    def __init__(self, address: str, token: str | None, timeout: float) -> None:
        self.address, self.token, self.timeout = address, token, timeout

    def call(self, operation: str, params: dict[str, Any]) -> Any:
        from pps_core.forward import request

        return request(self.address, "POST", f"/tools/{operation}", self.token, params, timeout=self.timeout)


def sync(remote, light: Light, payload: dict[str, Any]) -> int:
    """Send the turns the transcript gained since the last hook of this session (:func:`sync_turns`)."""
    return sync_turns(remote, light.home, light.assistant_name, light.user_name, payload)


def sync_turns(client, home: Path, assistant: str, user: str, payload: dict[str, Any]) -> int:
    """Store the turns the transcript gained since the last hook of this session through ``client`` (the server,
    or the stores opened here: anything with ``call``); returns how many. Under a per-session lock, so
    overlapping hooks never send a turn twice; the cursor is the transcript's byte offset."""
    from .cursor import state_path
    from .transcripts import transcript_turns

    transcript = payload.get("transcript_path")
    session = str(payload.get("session_id") or "unknown")
    if not transcript or not Path(transcript).expanduser().is_file():
        return 0
    transcript = str(Path(transcript).expanduser())
    state_file = state_path(home, session)
    private_dirs(state_file.parent)
    lock = os.open(state_file.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one hook of a session reads and sends at a time
        try:
            state = json.loads(state_file.read_text())
            state = state if isinstance(state, dict) else {}
        except (OSError, ValueError):
            state = {}
        offset = state.get("offset", 0) if state.get("transcript") == transcript else 0
        if offset > Path(transcript).stat().st_size:  # rewritten transcript: start over (ids dedupe)
            offset = 0
        turns, end = transcript_turns(Path(transcript), entity=assistant, user_name=user, offset=offset,
                                      session_id=session)
        for i in range(0, len(turns), BATCH):
            client.call("store_messages", {"messages": turns[i:i + BATCH]})
        if end != offset or not state_file.exists():
            replace_private(state_file, json.dumps({**state, "transcript": transcript, "offset": end,
                                                    "session_id": session, "updated": time.time()}))
        return len(turns)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)


def _newest_log(light: Light, exclude_session: str) -> Path | None:
    """The newest session log (hook transcripts and ``[recap] logs``), as ``pps_recap.store.newest_log``."""
    import glob

    found: dict[str, Path] = {}
    for pattern in light.recap_logs:
        for name in glob.glob(os.path.expanduser(str(pattern)), recursive=True):
            if os.path.isfile(name):
                found[str(Path(name).resolve())] = Path(name).resolve()
    for state_file in (light.home / "hooks" / "claude-code").glob("*.json"):
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(state, dict) or state.get("session_id") == exclude_session:
            continue
        path = Path(str(state.get("transcript") or ""))
        if state.get("transcript") and path.is_file():
            found[str(path.resolve())] = path.resolve()
    logs = [p for p in found.values() if p.stem != exclude_session]
    return max(logs, key=lambda p: (p.stat().st_mtime, str(p))) if logs else None


def _recap_stale(home: Path, log_file: Path) -> bool:
    """As ``pps_recap.store.is_stale``: no recap, its own log grew, or a later log left none."""
    if not (home / "_recap.md").is_file():
        return True
    try:
        meta = json.loads((home / "_recap.json").read_text())
    except (OSError, ValueError):
        meta = {}
    st = log_file.stat()
    if meta.get("source") == str(log_file.resolve()):
        return meta.get("source_size") != st.st_size or (meta.get("source_mtime") or 0) < st.st_mtime
    return st.st_mtime > (meta.get("generated") or 0)


def _refresh_recap(remote: Remote, light: Light, session: str) -> None:
    if "recap" not in light.plugins:
        return
    try:
        newest = _newest_log(light, session)
        if newest is not None and light.recap_shared:
            if not remote.call("session_recap", {"log": str(newest), "fast": True, "write": True,
                                                 "if_stale": True}).get("skipped"):
                log(light.home, f"SessionStart: recap regenerated from {newest}")
        elif newest is not None and _recap_stale(light.home, newest):
            remote.call("session_recap", {"log": str(newest), "fast": True, "write": True})
            log(light.home, f"SessionStart: recap regenerated from {newest}")
    except Exception as exc:  # noqa: BLE001 - the startup package matters more than the recap
        log(light.home, f"SessionStart: recap not regenerated: {type(exc).__name__}: {exc}")


def _spawn_recap(light: Light, transcript: str) -> None:
    import importlib.util
    import subprocess

    if sys.flags.no_site:  # started with -S: the installed packages are found through site
        import site

        site.main()
    if "recap" not in light.plugins or importlib.util.find_spec("pps_recap") is None:
        return
    from pps_hooks.isolated import python

    private_append(log_path(light.home), "")
    err = os.open(log_path(light.home), os.O_WRONLY | os.O_APPEND)
    try:  # isolated from the project the hook runs in (see pps_hooks.isolated): -I, in the entity's home
        subprocess.Popen(python("-m", "pps_core.cli", "recap", os.path.abspath(os.path.expanduser(transcript)),
                                "--entity", light.entity, "--home", str(light.home), "--save", "--quiet"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                         close_fds=True, cwd=light.home)
    finally:
        os.close(err)


def _handle(remote: Remote, light: Light, event: str, payload: dict[str, Any], recall: bool,
            via: str = "server") -> dict | None:
    """One hook's work through ``remote``. ``via="fleet"`` (``[claude_code] server_url``): the server is on another
    machine, so nothing that reads this machine's files runs there (the recap of a session log), and nothing runs
    here that would open a store (the recap written at SessionEnd)."""
    cc = light.cc
    fleet = via == "fleet"
    session = str(payload.get("session_id") or "unknown")
    channel = f"terminal:{session}"
    out = None
    stored = sync(remote, light, payload)
    if stored or event in ("Stop", "PreCompact", "SessionEnd"):
        record(light.home, "capture", event=event, session=session, turns=stored, via=via)
    if event == "SessionStart":
        if not fleet:
            _refresh_recap(remote, light, session)
        answer = remote.call("ambient_recall", {"context": "startup", "budget": cc["startup_budget"],
                                                "channel": channel})
        text = answer.get("text", "")
        out = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
        record(light.home, "injection", event=event, source=payload.get("source"), chars=len(text))
    elif event == "UserPromptSubmit" and (recall or cc["prompt_recall"]) and str(payload.get("prompt", "")).strip():
        prompt = str(payload["prompt"])[:20_000]
        answer = remote.call("ambient_recall", {"context": prompt, "limit_per_layer": cc["prompt_recall_limit"],
                                                "channel": channel})
        text = relevant_memories(answer, prompt, cc["prompt_recall_min_score"], cc["prompt_recall_budget"])
        if text:
            out = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
            record(light.home, "injection", event=event, chars=len(text))
    log(light.home, f"{event} session={session} new_turns={stored} via={via}")
    if event == "SessionEnd" and cc["recap_on_end"] and not fleet and payload.get("transcript_path"):
        _spawn_recap(light, str(payload["transcript_path"]))
    return out


def try_run(event_name: str, entity: str | None, home: str | None, raw: str, *, recall: bool, stdout) -> bool:
    """Run the hook here if a server owns the entity; False (nothing done) when the full path must run."""
    started = time.monotonic()
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return False
    if not isinstance(payload, dict):
        return False
    name = (event_name or str(payload.get("hook_event_name", ""))).replace("-", "").replace("_", "").lower()
    event = next((e for e in EVENTS if e.lower() == name), None)
    light = light_settings(entity, home) if event else None
    if light is None:
        return False
    try:  # the kernel's own light modules (no Memory, pydantic or pluggy): the owner lock and the token
        from pps_core.auth import read_token
        from pps_core.forward import address_of
        from pps_core.owner import read_owner
    except ImportError:  # pps-core is not beside this package on sys.path (an editable install): full path
        return False
    fleet = light.cc.get("server_url")
    if fleet is not None and not (isinstance(fleet, str) and fleet.startswith(("http://", "https://"))):
        return False  # the full loader names the bad value
    if fleet:  # [claude_code] server_url: a server elsewhere (a fleet); this machine opens nothing
        address = fleet.strip().rstrip("/")
        owner: dict[str, Any] = {"pid": address}  # what the hung-server memory keys on
    else:
        owner = read_owner(light.home) or {}
        address = address_of(owner)  # the owner's local channel, whatever transport it serves
        if not address:
            return False
    try:
        token = read_token(light.home)
    except OSError:
        token = None
    timeout = float(light.cc["timeout_s"])
    remote = Remote(address, token, timeout)
    session = str(payload.get("session_id") or "unknown")
    injecting = event in INJECTING or (event == "UserPromptSubmit" and (recall or light.cc["prompt_recall"]))
    from pps_hooks.logbook import read_status
    from pps_hooks.runner import emitter, guarded

    emit = emitter(stdout)

    hung = read_status(light.home).get("hung") or {}
    if hung.get("pid") == owner.get("pid") and time.time() - float(hung.get("at") or 0) < HUNG_MEMORY_S:
        reason = (f"the server (pid {owner.get('pid')}) did not answer a hook {time.time() - hung['at']:.0f}s ago; "
                  "not waiting for it again (restart it: pps hooks stop)") if not fleet else (
                  f"the server at {address} did not answer a hook {time.time() - hung['at']:.0f}s ago; "
                  f"not waiting for it again for {HUNG_MEMORY_S:g}s")
        log(light.home, f"{event}: skipped: {reason}")
        record(light.home, "error", event=event, message=reason)
        emit(failure_notice(light.home, event, session, reason, injecting=injecting))
        return True
    guarded(lambda: _handle(remote, light, event, payload, recall, via="fleet" if fleet else "server"),
            home=light.home, event=event, session=session, started=started, timeout=timeout, injecting=injecting,
            stdout=stdout, on_hang=lambda: record(light.home, "hung", pid=owner.get("pid")))
    return True

"""A server for the hooks: the first hook of a session starts one, detached, and every hook after it forwards.

``ensure_server`` returns the address of the process that owns the entity's stores, starting
``python -m pps_claude_code.server`` (the ``http`` transport on a free loopback port, served by
``pps_core.serving`` as ``pps serve http`` is) when nobody owns them. One per entity: the owner lock admits one, and a spawn lock keeps hooks that start at the
same moment from racing to start several. The server stops itself after ``[claude_code] server_idle_s``
without a request. Its log is ``logs/server.log`` (0600).
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pps_hooks.logbook import private_dirs, replace_private

POLL_S = 0.02


def server_log(home: Path) -> Path:
    return Path(home) / "logs" / "server.log"


def ensure_server(settings, cc, deadline: float) -> tuple[str | None, str]:
    """(the owner's address or None, how: ``running``, ``started``, or why there is none).

    While it waits for a server to publish its address it re-reads the owner lock: a server that held the lock
    and let go of it (killed, crashed, stopped) will never answer, so the hook starts another at once instead of
    waiting out its budget for a dead pid."""
    from pps_core.forward import server_address

    home = Path(settings.home)
    found = _running(home, deadline)
    if found is not None:
        return found
    why = _cannot_start(home, cc)
    if why:
        return None, why
    lock_path = home / "hooks" / "claude-code" / "server.lock"
    private_dirs(lock_path.parent)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:  # one hook starts it; the others wait for its address
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                address = server_address(home)
                if address:
                    return address, "running"
                if time.monotonic() > deadline:
                    return None, "another hook is starting the server"
                time.sleep(POLL_S)
        found = _running(home, deadline)
        if found is not None:
            return found
        earlier = _spawned_pid(home)
        if earlier and _alive(earlier) and not _gone(home, earlier):
            # started before, still running without an address (opening its stores): do not stack up
            found = _wait_for_address(home, deadline, earlier)
            if found is not None:
                return found
        child = spawn(settings)
        replace_private(_pid_file(home), str(child.pid))
        while time.monotonic() < deadline:
            address = server_address(home)
            if address:
                return address, "started"
            if child.poll() is not None:
                return None, f"the server exited at once (code {child.returncode}); see {server_log(home)}"
            time.sleep(POLL_S)
        return None, f"the server is still starting (pid {child.pid})"
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


#: ``server_state``'s answer when nobody owns the entity and the hooks may start its server.
COLD = "cold: no server runs"


def _cannot_start(home: Path, cc) -> str | None:
    """Why the hooks may not start a server for this entity, or None."""
    if not cc.autostart:
        return "autostart off"
    if _no_owner_marker(home).exists() and _no_owner_marker(home).read_text() == _toml_stamp(home):
        return "autostart off: the entity needs no owner process (no exclusive store)"
    if not _http_installed():
        return "pps-http is not installed (needed to start a server)"
    return None


@functools.cache
def _http_installed() -> bool:
    """Whether the ``http`` plugin is installed (read once a process: listing entry points costs a hook ~50 ms)."""
    from pps_core.plugins import installed_plugins

    return "http" in installed_plugins()


def server_state(settings, cc) -> tuple[str | None, str]:
    """Like :func:`ensure_server`, without waiting or starting anything: (the address, ``running``) when a server
    answers now; (None, :data:`COLD`) when nobody owns the entity and the hooks may start its server (see
    :func:`start_detached`); (None, ``... still starting``) while the one the hooks started opens its stores;
    else (None, why there is none)."""
    home = Path(settings.home)
    found = _running(home, time.monotonic())
    if found is not None:
        return found
    earlier = _spawned_pid(home)
    if earlier and _alive(earlier) and not _gone(home, earlier):
        return None, f"the server (pid {earlier}) is still starting"
    return None, _cannot_start(home, cc) or COLD


def start_detached(settings, cc) -> str:
    """Start the entity's server and return at once (a cold hook answers from a glance; the next one finds the
    server warm): ``started (pid N)``, or why none was started (one is starting, autostart is off, ...)."""
    home = Path(settings.home)
    why = _cannot_start(home, cc)
    if why:
        return why
    lock_path = home / "hooks" / "claude-code" / "server.lock"
    private_dirs(lock_path.parent)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "another hook is starting the server"
        address, how = server_state(settings, cc)
        if how != COLD:
            return address and "running" or how
        child = spawn(settings)
        replace_private(_pid_file(home), str(child.pid))
        return f"started (pid {child.pid})"
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _running(home: Path, deadline: float) -> tuple[str | None, str] | None:
    """The answer when a process owns the entity (its address, or why it serves none); None when nobody does,
    or when the server the hooks started went away while this hook waited for it."""
    from pps_core.forward import server_address
    from pps_core.owner import read_owner

    address = server_address(home)
    if address:
        return address, "running"
    owner = read_owner(home)
    if owner is None:
        return None
    if owner.get("pid") in (None, _spawned_pid(home)):  # ours, still opening its stores (or mid-write)
        return _wait_for_address(home, deadline, owner.get("pid"))
    return None, "owned by a process that serves nothing (a command working on the stores)"


def _pid_file(home: Path) -> Path:
    return Path(home) / "hooks" / "claude-code" / "server.pid"


def _spawned_pid(home: Path) -> int | None:
    try:
        return int(_pid_file(home).read_text().strip())
    except (OSError, ValueError):
        return None


def _no_owner_marker(home: Path) -> Path:
    return Path(home) / "hooks" / "claude-code" / "no-owner"


def _toml_stamp(home: Path) -> str:
    try:
        st = (Path(home) / "pps.toml").stat()
    except OSError:
        return ""
    return f"{st.st_mtime_ns} {st.st_size} {st.st_ino}"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs. A zombie (dead, not yet reaped: its parent, or an init that does not reap, as in
    many containers) does not, though ``kill(pid, 0)`` still succeeds."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rpartition(b")")[2].split()[:1]
    except OSError:  # no /proc (macOS): kill(0) is all there is
        return True
    return state not in ([b"Z"], [b"X"])


def _gone(home: Path, pid: int | None) -> bool:
    """Whether server ``pid`` will never publish an address: the owner lock is free, and either it still names
    ``pid`` (which held it and let go: killed, crashed or stopping) or ``pid`` no longer runs."""
    from pps_core.owner import LOCK_NAME, read_owner

    if read_owner(home) is not None:
        return False
    if pid is None or not _alive(pid):
        return True
    try:
        named = json.loads((Path(home) / LOCK_NAME).read_text() or "{}").get("pid")
    except (OSError, ValueError, AttributeError):
        return False
    return bool(named == pid)


def _wait_for_address(home: Path, deadline: float, pid: int | None) -> tuple[str | None, str] | None:
    """Wait for server ``pid`` to publish its address. The owner lock is re-read at every poll: None as soon as
    the server is gone (:func:`_gone`), so the caller starts another instead of waiting for a dead pid."""
    from pps_core.forward import server_address

    while time.monotonic() < deadline:
        address = server_address(home)
        if address:
            return address, "running"
        if _gone(home, pid):
            return None
        time.sleep(POLL_S)
    return None, f"the server (pid {pid}) is still starting"


def stop_server(settings, wait_s: float = 30.0) -> str:
    """Stop the server the hooks started for this entity (SIGTERM, then wait for it to let go of the stores)."""
    import signal

    from pps_core.owner import read_owner

    home = Path(settings.home)
    owner = read_owner(home)
    if owner is None:
        return f"no server owns entity {settings.entity!r}"
    pid = owner.get("pid")
    if not pid or pid != _spawned_pid(home):
        return (f"pid {pid} owns entity {settings.entity!r} but was not started by the hooks; "
                "stop it where it was started")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return f"pid {pid} had already stopped"
    deadline = time.monotonic() + wait_s
    while read_owner(home) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    if read_owner(home) is not None:
        return f"sent SIGTERM to pid {pid}; it still holds the stores after {wait_s:g}s"
    return f"stopped the hooks' server (pid {pid}) of entity {settings.entity!r}"


def spawn(settings) -> subprocess.Popen:
    """Start the entity's server detached from the hook (its own session; stdio to the server log), isolated
    from the project the hook runs in (:mod:`pps_hooks.isolated`): ``-I``, in the entity's home."""
    from pps_hooks.isolated import python
    from pps_hooks.logbook import private_append

    log = server_log(settings.home)
    private_append(log, f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} starting for entity {settings.entity}\n")
    out = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        return subprocess.Popen(
            python("-m", "pps_claude_code.server", "--entity", settings.entity, "--home", str(settings.home)),
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True,
            cwd=settings.home)
    finally:
        os.close(out)


def serve(settings, idle_s: float) -> int:
    """Own the entity and serve it with the ``http`` transport on a free loopback port (``pps_core.serving``: the
    owner lock, the address published once the socket accepts, SIGTERM) until ``idle_s`` pass without a call."""
    from pps_core.serving import run

    if "http" not in settings.plugins:  # the hooks' server speaks the http transport even when no one else does
        settings = settings.model_copy(update={"plugins": [*settings.plugins, "http"]})

    def owned(served) -> bool:
        memory = served.primary.memory
        if memory is not None and not memory.lock.held:  # every store a server of its own: no owner needed
            replace_private(_no_owner_marker(settings.home), _toml_stamp(settings.home))  # until pps.toml changes
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} entity {settings.entity} needs no owner process "
                  "(no exclusive store): stopping", file=sys.stderr, flush=True)
            return False
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} owning {settings.entity} (pid {os.getpid()})",
              file=sys.stderr, flush=True)
        return True

    # REST only: hooks reach it on the kernel's local channel, and the MCP SDK costs a cold start ~15%
    return run("http", settings, ["--host", "127.0.0.1", "--port", "0", "--no-mcp"], on_served=owned,
               idle_s=idle_s)


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # started with -I by the hooks; run any other way, its children still stay off the cwd
        from pps_core.safepath import keep_cwd_off_path

        keep_cwd_off_path()
    parser = argparse.ArgumentParser(prog="python -m pps_claude_code.server",
                                     description="the entity's server started by the Claude Code hooks")
    parser.add_argument("--entity")
    parser.add_argument("--home")
    parser.add_argument("--idle", type=float, help="stop after this many idle seconds (default [claude_code] "
                                                   "server_idle_s; 0 = never)")
    args = parser.parse_args(argv)
    from pps_core.errors import PPSError
    from pps_core.settings import load_settings

    from .config import cc_settings

    try:
        settings = load_settings(args.entity, args.home, must_exist=True)
        idle = args.idle if args.idle is not None else cc_settings(settings).server_idle_s
        return serve(settings, idle)
    except PPSError as exc:
        print(f"pps server: error: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

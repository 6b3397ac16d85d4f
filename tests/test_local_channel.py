"""The kernel's local channel (issue 38): whatever transport owns an entity, other processes reach the owner.

`pps serve unixsock` (a third-party transport with no HTTP at all) used to lock the entity away from `pps call`,
`pps health` and the Claude Code hooks ("owned by another process"): the kernel reached an owner only through the
HTTP plugin's REST protocol. Now every process that owns an entity to serve it answers on a socket of the kernel's
own (0600, in the home or, when that path is too long for AF_UNIX, in a private runtime folder), named in the owner
lock.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pps_core.owner import read_owner
from pps_core.testing.server import init_entity, pps, pps_env

FIXTURE = Path(__file__).parent.parent / "plugins" / "claude_code" / "tests" / "fixtures" / "claude_code_session.jsonl"
SESSION = "5f3c2a9e-1111-4c7e-9a51-0d6b2e7c0a01"


def _serve(root: Path, *args: str) -> subprocess.Popen[str]:
    log = open(root / "server.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([sys.executable, "-P", "-m", "pps_core.cli", "serve", *args], env=pps_env(root),
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)


def _wait(root: Path, proc: subprocess.Popen[str], ready) -> None:  # noqa: ANN001 - a predicate
    deadline = time.monotonic() + 60
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the server did not start:\n{(root / 'server.log').read_text()}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _jsonrpc(path: Path, method: str, params: dict) -> dict:
    """One request on the unixsock transport's own socket (JSON-RPC 2.0, one line)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def _hook(root: Path, home: Path, event: str, transcript: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """The installed hook command, as Claude Code runs it: through a shell, the event JSON on stdin."""
    from pps_claude_code.install import hooks_config

    command = hooks_config("lyra", home)[event][0]["hooks"][0]["command"]
    env = pps_env(root, PPS_CLAUDE_CODE_USER_NAME="ana", PPS_CLAUDE_CODE_AUTOSTART="false")
    body = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/home/ana/ledger",
            "hook_event_name": event, **extra}
    return subprocess.run(command, shell=True, input=json.dumps(body), capture_output=True, text=True, env=env,
                          timeout=60)


@pytest.mark.skipif(shutil.which("sh") is None, reason="posix only")
def test_an_entity_served_only_over_unixsock_is_reached_by_call_health_and_the_hooks(tmp_path: Path) -> None:
    pytest.importorskip("pps_unixsock")
    pytest.importorskip("pps_claude_code")
    root = tmp_path
    home = init_entity(root, "lyra", "sqlite,crystals,unixsock")
    server = _serve(root, "unixsock", "--entity", "lyra")
    try:
        _wait(root, server, lambda: (home / "pps.sock").exists() and (read_owner(home) or {}).get("channel"))
        assert (read_owner(home) or {})["channel"] == str(home / "owner.sock")  # the kernel's, beside the transport's
        assert stat.S_IMODE(os.lstat(home / "owner.sock").st_mode) == 0o600
        said = _jsonrpc(home / "pps.sock", "tools/call", {"name": "store_message", "arguments": {
            "content": "said over the unix socket", "author_name": "Brandi", "channel": "discord:home"}})
        assert "result" in said, said

        called = pps(root, "call", "--entity", "lyra", "store_message",
                     json.dumps({"content": "said from pps call", "author_name": "Jeff", "channel": "terminal"}),
                     check=False)
        assert called.returncode == 0, called.stderr  # was: "owned by another process"
        health = pps(root, "health", "--entity", "lyra", "--json", check=False)
        assert health.returncode == 0, health.stderr  # the owner answers: the stores cannot open twice
        assert json.loads(health.stdout)["layers"]["raw_capture"]["available"]
        doctor = pps(root, "doctor", "--entity", "lyra", check=False)
        assert re.search(r"server\W.*pid \d+ at unix:/\S+ answers", doctor.stdout), doctor.stdout + doctor.stderr

        transcript = tmp_path / f"{SESSION}.jsonl"
        transcript.write_text("".join(FIXTURE.read_text().splitlines(keepends=True)[:44]))
        stop = _hook(root, home, "Stop", transcript)
        assert stop.returncode == 0 and stop.stdout == "", (stop.stdout, stop.stderr)
        start = _hook(root, home, "SessionStart", transcript, source="resume")
        assert start.returncode == 0, start.stderr
        context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "said over the unix socket" in context and "said from pps call" in context
        assert "Both fixes are in the working tree" in context  # the Stop hook's turns, stored by the owner

        turns = _jsonrpc(home / "pps.sock", "tools/call", {"name": "get_turns_since_summary",
                                                           "arguments": {"limit": 100}})["result"]["turns"]
        contents = " ".join(t["content"] for t in turns)
        assert "said from pps call" in contents and "Both fixes are in the working tree" in contents
        assert "via=server" in (home / "logs" / "hooks.log").read_text()
        assert server.poll() is None  # one owner all along
    finally:
        _stop(server)
    assert "Traceback" not in (root / "server.log").read_text()
    assert read_owner(home) is None


def _line(path: str, raw: bytes) -> dict:
    """One raw request line on an owner's local channel, its answer decoded."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(raw)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def test_a_long_home_gets_a_short_private_socket_and_a_killed_owner_is_not_waited_on(tmp_path: Path) -> None:
    """AF_UNIX paths are short (108 bytes): a home deeper than that gets its socket in a private runtime folder,
    named in the owner lock. The socket is 0600. Bad lines get clear errors. An owner killed with -9 leaves its
    socket behind: the next command runs on its own at once, and the socket is removed."""
    pytest.importorskip("pps_http")
    root = tmp_path / ("deep" * 20)
    home = init_entity(root, "lyra", "sqlite,http", "[limits]", "max_request_bytes = 4096")
    assert len(os.fsencode(home / "owner.sock")) >= 108
    server = _serve(root, "http", "--entity", "lyra", "--port", "0")
    try:
        _wait(root, server, lambda: (read_owner(home) or {}).get("channel"))
        path = Path((read_owner(home) or {})["channel"])
        assert len(os.fsencode(path)) < 104 and home not in path.parents
        mode = os.lstat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        folder = os.lstat(path.parent)
        assert folder.st_uid == os.getuid() and stat.S_IMODE(folder.st_mode) == 0o700

        called = pps(root, "call", "--entity", "lyra", "store_message",
                     json.dumps({"content": "said before the crash", "author_name": "Jeff", "channel": "terminal"}),
                     check=False)
        assert called.returncode == 0, called.stderr

        bad = _line(str(path), b"not json\n")
        assert bad["ok"] is False and bad["error"]["error"] == "invalid_params" and bad["error"]["status"] == 422
        unknown = _line(str(path), b'{"op": "call", "name": "no_such_operation"}\n')
        assert unknown["error"]["error"] == "unknown_operation"
        big = _line(str(path), json.dumps({"op": "call", "name": "store_message",
                                           "params": {"content": "x" * 2_000_000}}).encode() + b"\n")
        assert big["error"]["error"] == "too_large"  # the whole line read and answered, not cut off
        relayed = _line(str(path), b'{"op": "call", "name": "pps_health", "token": "not-the-token", "via": "t"}\n')
        assert relayed["error"]["error"] == "unauthorized"  # a relayed caller is admitted by its token
        token = (home / "token").read_text().strip()
        relayed = _line(str(path), json.dumps({"op": "call", "name": "pps_health", "token": token}).encode() + b"\n")
        assert relayed["ok"] is True

        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        assert path.exists()  # nobody removed it: the owner died
        after = pps(root, "call", "--entity", "lyra", "get_turns_since_summary", '{"limit": 10}', check=False,
                    timeout=60)
        assert after.returncode == 0, after.stderr  # not hung on the dead socket: the stores opened here
        assert "said before the crash" in after.stdout
        assert not path.exists()  # removed by the process that took the owner lock next
    finally:
        _stop(server)


def test_an_owner_whose_channel_does_not_answer_is_reported_not_waited_on(tmp_path: Path) -> None:
    """The lock is held and names a channel, but nothing listens there (refused), or a stuck process accepts and
    never answers: the command gets Unavailable, bounded by its timeout."""
    from pps_core import errors
    from pps_core.forward import request, try_forward
    from pps_core.owner import OwnerLock, channel_path
    from pps_core.settings import load_settings

    home = init_entity(tmp_path, "lyra", "sqlite")
    lock = OwnerLock(home)
    lock.acquire()
    path = channel_path(home)
    try:
        with socket.socket(socket.AF_UNIX) as deaf:
            deaf.bind(str(path))  # bound, never listening: connections are refused
            lock.set_channel(path)
            started = time.monotonic()
            with pytest.raises(errors.Unavailable, match="did not answer on its channel"):
                try_forward(load_settings("lyra", home), "pps_health", {})
            assert time.monotonic() - started < 60  # a hang guard, not a speed bound
        path.unlink()
        with socket.socket(socket.AF_UNIX) as stuck:
            stuck.bind(str(path))
            stuck.listen(1)  # accepts (the kernel's backlog), never answers: a stopped process
            with pytest.raises(errors.Unavailable, match="did not answer on its channel"):
                request(f"unix:{path}", "POST", "/tools/pps_health", None, {}, timeout=1)
    finally:
        lock.release()

"""The kernel's local channel (issue 38): whatever transport owns an entity, other processes reach the owner.

`pps serve unixsock` (a third-party transport with no HTTP at all) used to lock the entity away from `pps call`,
`pps health` and the Claude Code hooks ("owned by another process"): the kernel reached an owner only through the
HTTP plugin's REST protocol. Now every process that owns an entity to serve it answers on a socket of the kernel's
own (0600, in the home or, when that path is too long for AF_UNIX, in a private runtime folder), named in the owner
lock.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
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
        _wait(root, server, lambda: (home / "pps.sock").exists())
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

"""An interrupted backup leaves no copy of the entity in its home (issue 35 item 6).

A backup stages its copies beside the archive (``<home>/backups/`` for one the server writes). A process killed
while it writes leaves them there, where no later forget reaches: the next open of the entity removes them (a
staging folder is locked while in use, so one still in use is left alone). Ctrl-C of ``pps backup`` while a server
writes the archive cancels it there and says so; nothing is left in the home.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from pps_core.testing.server import Server, init_entity, pps, pps_env

CANARY = "zqfbackupcanary"

#: Runs the real `pps` with the backup's SQLite copy made slow: it says when it is copying (argv[1]), then waits
#: for a file (argv[2]) to exist, so a test can interrupt or kill a backup half-way, deterministically.
SLOW = """
import os, sys, time
import pps_core.builtin.backup as backup
marker, release = sys.argv[1], sys.argv[2]
original = backup._copy_sqlite
def slow(src, dest):
    original(src, dest)
    open(marker, "w").close()
    while not os.path.exists(release):
        time.sleep(0.05)
backup._copy_sqlite = slow
from pps_core.cli import main
sys.exit(main(sys.argv[3:]))
"""


def _slow(root: Path, marker: Path, release: Path, *args: str, log: Path) -> subprocess.Popen:
    with open(log, "ab") as fh:
        return subprocess.Popen([sys.executable, "-P", "-c", SLOW, str(marker), str(release), *args],
                                env=pps_env(root), stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait(what, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).is_success
    except httpx.HTTPError:
        return False


def _hits(home: Path) -> list[str]:
    return [str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]


def _store_and_forget(root: Path) -> None:
    """The canary turn, forgotten through `pps call` (which opens the entity when no server owns it)."""
    found = json.loads(pps(root, "call", "--entity", "lyra", "raw_search", json.dumps({"query": CANARY})).stdout)
    ids = [r["id"] for r in found["results"] if CANARY in r["content"]]
    assert ids
    pps(root, "call", "--entity", "lyra", "forget_turns", json.dumps({"ids": ids}))


def test_a_backup_killed_half_way_leaves_nothing_a_later_forget_misses(tmp_path):
    home = init_entity(tmp_path, "lyra", "sqlite")
    pps(tmp_path, "call", "--entity", "lyra", "store_message", json.dumps(
        {"content": f"the {CANARY} code", "author_name": "Jeff", "channel": "web"}))
    marker, release = tmp_path / "copying", tmp_path / "never"
    script = ("import asyncio, sys\nfrom pps_core.memory import Memory\nfrom pps_core.settings import load_settings\n"
              "async def go():\n"
              "    async with Memory(load_settings(None, sys.argv[3], must_exist=True)) as m:\n"
              "        await m.call('pps_backup', {'path': 'nightly.tar.gz'})\n"
              "asyncio.run(go())\n")
    proc = subprocess.Popen([sys.executable, "-P", "-c", SLOW.replace("from pps_core.cli import main\n"
                                                                      "sys.exit(main(sys.argv[3:]))", script),
                             str(marker), str(release), str(home)], env=pps_env(tmp_path))
    try:
        _wait(marker.exists)
    finally:
        proc.kill()  # the owner dies half-way through pps_backup (kill -9)
        proc.wait()
    left = sorted(p.name for p in (home / "backups").iterdir())
    assert any(n.startswith(".pps-") for n in left), left  # what a dead backup leaves
    assert _hits(home)

    _store_and_forget(tmp_path)  # the next open cleans up; then the forget reaches everything else
    assert [p.name for p in (home / "backups").iterdir()] == []
    assert _hits(home) == []


def test_ctrl_c_of_pps_backup_while_a_server_writes_it_cancels_it_there_and_says_so(tmp_path):
    home = init_entity(tmp_path, "lyra", "sqlite,http")
    marker, release = tmp_path / "copying", tmp_path / "release"
    log = tmp_path / "server.log"
    server_proc = _slow(tmp_path, marker, release, "serve", "http", "--port", "0", "--entity", "lyra", log=log)
    server = None
    try:
        url = _wait(lambda: (re.search(rb"at (http://[\d.]+:\d+)", log.read_bytes()) or [None, None])[1])
        server = Server(url=url.decode(), root=tmp_path, proc=server_proc, log=log, entity="lyra")
        _wait(lambda: _healthy(server.url))
        assert server.call("store_message", {"content": f"the {CANARY} code", "author_name": "Jeff",
                                             "channel": "web"}).status_code == 200
        out = tmp_path / "lyra.tar.gz"
        # Ctrl-C's default action restored for the command, as a terminal gives it: a suite run in the background
        # (`make test &`) hands its children SIGINT ignored, and Python then installs no KeyboardInterrupt handler
        cli = subprocess.Popen([sys.executable, "-P", "-m", "pps_core.cli", "backup", "--entity", "lyra", str(out)],
                               env=pps_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        _wait(marker.exists)  # the server is writing the archive into <home>/backups
        cli.send_signal(signal.SIGINT)
        stdout, stderr = cli.communicate(timeout=60)
        assert cli.returncode == 130, (stdout, stderr)
        assert "interrupted" in stderr and "cancel" in stderr, stderr
        release.touch()  # the server's copy goes on, and ends
        _wait(lambda: not any(p.name.startswith(".pps-") for p in (home / "backups").iterdir()))
        time.sleep(0.5)
        assert list((home / "backups").iterdir()) == [] and not out.exists()
        answer = server.call("raw_search", {"query": CANARY}).json()
        ids = [r["id"] for r in answer["results"] if CANARY in r["content"]]
        assert server.call("forget_turns", {"ids": ids}).status_code == 200
        assert _hits(home) == []
    finally:
        release.touch()
        if server is not None:
            server.stop()
        else:
            server_proc.kill()
            server_proc.wait()
    assert os.path.isdir(home)

"""A command that meets a server still starting waits for it (issue 39: warming up is not failing).

`pps setup` starts the hooks' server; `pps doctor` run right after found the owner lock held by a process that had
not yet published where it serves, opened the stores itself and failed with "owned by another process". A process
that holds the lock and is still starting is waited for: the command forwards once it serves, or opens the entity
itself once it let go."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from pps_core.testing.server import init_entity, pps, pps_env

HOLDER = """
import sys, time
from pathlib import Path
from pps_core.owner import OwnerLock
lock = OwnerLock(Path(sys.argv[1]))
lock.starting = True        # taken to serve, as `pps serve` does (pps_core.serving)
lock.acquire(None)          # owned, no address yet: a server still opening its stores
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
"""


def test_a_call_during_an_owners_start_waits_for_it_instead_of_failing(tmp_path):
    root = tmp_path / "root"
    home = init_entity(root, "lyra", "sqlite")
    env = pps_env(root)
    holder = subprocess.Popen([sys.executable, "-P", "-c", HOLDER, str(home), "2.5"], stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        out = pps(root, "call", "--entity", "lyra", "store_message",
                  json.dumps({"content": "said while the server was starting", "author_name": "Jeff",
                              "channel": "terminal"}), env=env, check=False)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["id"], out.stdout
        assert time.monotonic() - started > 1.0  # it waited for the starting owner rather than racing it
    finally:
        holder.wait(timeout=30)


def test_an_owner_that_is_not_serving_is_refused_at_once(tmp_path):
    """A process that holds the stores to use them itself (a script, a stdio server) is not waited for."""
    root = tmp_path / "root"
    home = init_entity(root, "lyra", "sqlite")
    env = pps_env(root)
    holder = subprocess.Popen([sys.executable, "-P", "-c", HOLDER.replace("lock.starting = True", "pass"),
                               str(home), "20"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        out = pps(root, "call", "--entity", "lyra", "list_turns", "{}", env=env, check=False)
        assert out.returncode == 2 and "owned by another process" in out.stderr, out
        assert time.monotonic() - started < 15
    finally:
        holder.kill()
        holder.wait(timeout=30)

"""Claude Code hooks under a permissive umask (issue 14): after the hooks start the entity's server, capture
turns and the server stops when idle, nothing under the home is group/other-readable (files 0600, folders
0700): logs, state, the settings cache, the server's lock and pid files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

from pps_claude_code.install import hooks_config

from pps_core.owner import read_owner
from pps_core.testing.server import pps, pps_env

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SESSION = "5f3c2a9e-2222-4c7e-9a51-0d6b2e7c0a01"


def test_hook_journeys_leave_nothing_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite,crystals", "--timezone", "UTC")
        home = tmp_path / "lyra"
        transcript = tmp_path / f"{SESSION}.jsonl"
        transcript.write_text("".join(FIXTURE.read_text().splitlines(keepends=True)[:44]))
        env = pps_env(tmp_path, PPS_CLAUDE_CODE_USER_NAME="Jeff", PPS_CLAUDE_CODE_AUTOSTART="true",
                      PPS_CLAUDE_CODE_SERVER_IDLE_S="3", PPS_CLAUDE_CODE_SERVER_START_S="60")
        for event, extra in [("SessionStart", {"source": "startup"}), ("Stop", {}),
                             ("UserPromptSubmit", {"prompt": "export"}), ("PreCompact", {"trigger": "manual"})]:
            body = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(tmp_path),
                    "hook_event_name": event, **extra}
            command = hooks_config("lyra", home)[event][0]["hooks"][0]["command"]
            out = subprocess.run(command, shell=True, input=json.dumps(body), capture_output=True, text=True,
                                 env=env, timeout=120)
            assert out.returncode == 0, (event, out.stderr[-2000:])
        assert (home / "hooks" / "claude-code" / "server.pid").exists()
        deadline = time.monotonic() + 60
        while read_owner(home) is not None and time.monotonic() < deadline:  # idle: the server stops itself
            time.sleep(0.2)
        assert read_owner(home) is None
    finally:
        os.umask(old)
    loose = []
    for base, dirs, files in os.walk(home):
        for name in dirs + files:
            path = Path(base, name)
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                loose.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(home)}")
    assert loose == []

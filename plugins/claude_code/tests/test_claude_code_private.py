"""<private>...</private> in a Claude Code prompt never reaches the store through the hooks (the sqlite
operations drop it on every capture path; this is the path a person's terminal takes)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from pps_claude_code.install import hooks_config

from pps_core.testing.server import pps as run_pps
from pps_core.testing.server import pps_env

SESSION = "5f3c2a9e-2222-4c7e-9a51-0d6b2e7c0a01"


def env_for(root: Path) -> dict[str, str]:
    return pps_env(root, PPS_CLAUDE_CODE_USER_NAME="ana", PPS_CLAUDE_CODE_AUTOSTART="false")


def pps(root: Path, *args: str) -> subprocess.CompletedProcess:
    return run_pps(root, *args, env=env_for(root), input="", timeout=60)


def run_hook(root: Path, event: str, transcript: Path) -> subprocess.CompletedProcess:
    """As Claude Code runs it: the installed command line, through a shell, the event JSON on stdin."""
    command = hooks_config("lyra", root / "lyra")[event][0]["hooks"][0]["command"]
    event_json = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/home/ana",
                  "hook_event_name": event, "stop_hook_active": False}
    return subprocess.run(command, shell=True, input=json.dumps(event_json), capture_output=True, text=True,
                          env=env_for(root), timeout=30)


def stored(root: Path) -> list[dict]:
    out = pps(root, "call", "--entity", "lyra", "get_turns_since_summary", '{"limit": 200, "oldest_first": true}')
    return json.loads(out.stdout)["turns"]

SECRET = "hunter2-correct-horse"


def test_private_spans_in_a_prompt_are_not_captured(tmp_path):
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite", "--timezone", "UTC")
    transcript = tmp_path / f"{SESSION}.jsonl"
    lines = [
        {"type": "user", "sessionId": SESSION, "uuid": "00000000-0000-4000-8000-0000000000a1",
         "timestamp": "2026-03-14T09:01:00Z", "message": {"role": "user", "content":
             f"deploy with the key <private>{SECRET}</private> please"}},
        {"type": "assistant", "sessionId": SESSION, "uuid": "00000000-0000-4000-8000-0000000000a2",
         "timestamp": "2026-03-14T09:01:05Z", "message": {"role": "assistant", "content": [
             {"type": "text", "text": "Deployed."}]}},
    ]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    stop = run_hook(tmp_path, "Stop", transcript)
    assert stop.returncode == 0, stop.stderr
    turns = stored(tmp_path)
    assert [t["content"] for t in turns] == ["deploy with the key please", "Deployed."]
    found = json.loads(pps(tmp_path, "call", "--entity", "lyra", "raw_search", json.dumps({"query": SECRET})).stdout)
    assert found["count"] == 0
    assert SECRET.encode() not in (tmp_path / "lyra" / "pps.db").read_bytes()

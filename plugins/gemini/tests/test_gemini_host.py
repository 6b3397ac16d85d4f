"""Gemini CLI as a host: `pps setup gemini` writes the hooks into Gemini CLI's settings.json, and the exact command
lines it wrote, run as Gemini CLI runs them (a shell, the recorded payload on stdin, the user's project as the
working directory), capture every turn once and inject the startup package in Gemini CLI's output shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pps_hooks.testkit import hostile_project, pps, run_as_host, stored_turns

PAYLOADS = Path(__file__).parent / "payloads"
SESSION = "8b1c6f0e-3d2a-4e5b-9c7d-2f4a6b8c0d1e"
PROMPT = "What did we decide about the cache eviction policy yesterday?"
REPLY = "We settled on LRU with a 10-minute TTL for the embeddings cache, and no eviction for crystals."


def payload(event: str, transcript: Path) -> dict:
    body = json.loads((PAYLOADS / f"{event}.json").read_text())
    body["transcript_path"] = str(transcript)
    return body


@pytest.fixture
def installed(tmp_path):
    home = tmp_path
    pps(home, "init", "--entity", "lyra", "--plugins", "sqlite")
    config = home / ".gemini" / "settings.json"
    config.parent.mkdir()
    mine = {"BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "./guard.sh"}]}]}
    config.write_text(json.dumps({"ui": {"theme": "Dracula"}, "hooks": mine}))
    pps(home, "setup", "gemini", "--entity", "lyra")
    return home, config, mine


def test_setup_is_idempotent_keeps_the_users_entries_and_uninstalls(installed):
    home, config, mine = installed
    first = config.read_bytes()
    pps(home, "setup", "gemini", "--entity", "lyra")
    assert config.read_bytes() == first  # run twice, same file
    data = json.loads(first)
    assert data["ui"] == {"theme": "Dracula"} and data["hooks"]["BeforeTool"] == mine["BeforeTool"]
    assert set(data["hooks"]) == {"BeforeTool", "SessionStart", "BeforeAgent", "AfterAgent", "PreCompress",
                                  "SessionEnd"}
    hook = data["hooks"]["SessionStart"][0]["hooks"][0]
    assert hook["type"] == "command" and hook["timeout"] == 20_000  # milliseconds, Gemini CLI's unit
    assert " -I " in hook["command"] and "--entity lyra" in hook["command"]
    assert config.stat().st_mode & 0o077 == 0
    status = pps(home, "hooks", "status", "--entity", "lyra").stdout
    assert "gemini hooks: AfterAgent, BeforeAgent, PreCompress, SessionEnd, SessionStart" in status, status
    # a Gemini-only user: Claude Code without hooks is a choice, not a failure of `pps doctor` or of the status
    doctor = pps(home, "doctor", "--entity", "lyra", check=False)
    assert doctor.returncode == 0 and "] gemini hooks: AfterAgent" in doctor.stdout, doctor.stdout
    assert "Claude Code: not installed" in doctor.stdout and "Claude Code: not installed" in status
    pps(home, "hooks", "uninstall", "--host", "gemini")
    left = json.loads(config.read_text())
    assert left == {"ui": {"theme": "Dracula"}, "hooks": mine}


def test_recorded_payloads_through_the_installed_commands(installed, tmp_path):
    home, config, _ = installed
    hooks = json.loads(config.read_text())["hooks"]
    transcript = home / ".gemini" / "tmp" / "3f9a1c" / "chats" / "session-2026-08-21T10-02-8b1c6f0e.jsonl"
    transcript.parent.mkdir(parents=True)
    shutil.copy(PAYLOADS / "transcript.jsonl", transcript)
    project, markers = hostile_project(tmp_path)
    outputs = {}
    # as a session runs: start, the prompt, the reply (twice: a retry fires AfterAgent again), /compress, exit
    for event in ("SessionStart", "BeforeAgent", "AfterAgent", "AfterAgent", "PreCompress", "SessionEnd"):
        command = hooks[event][0]["hooks"][0]["command"]
        outputs.setdefault(event, []).append(run_as_host(command, payload(event, transcript), home, project))
    start = outputs["SessionStart"][0]
    assert set(start) == {"hookSpecificOutput"}, start
    assert set(start["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert start["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert 0 < len(start["hookSpecificOutput"]["additionalContext"]) <= 9_000
    assert all(out == {} for e, outs in outputs.items() if e != "SessionStart" for out in outs), outputs
    assert list(markers.iterdir()) == []  # nothing from the project was imported
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"]) for t in turns] == [("someone", PROMPT), ("Lyra", REPLY)]
    again = run_as_host(hooks["SessionStart"][0]["hooks"][0]["command"], payload("SessionStart", transcript),
                          home, project)
    assert "eviction" in again["hookSpecificOutput"]["additionalContext"]  # the captured turns come back
    imported = pps(home, "import", "gemini", str(transcript), "--entity", "lyra").stdout
    assert "read 2 turns" in imported and "0 new" in imported, imported
    status = pps(home, "hooks", "status", "--entity", "lyra").stdout
    assert "gemini last capture" in status and "turns=" in status, status


def test_no_transcript_captures_the_turn_from_the_payload_once(installed, tmp_path):
    home, config, _ = installed
    command = json.loads(config.read_text())["hooks"]["AfterAgent"][0]["hooks"][0]["command"]
    body = json.loads((PAYLOADS / "AfterAgent.json").read_text())
    body["transcript_path"] = ""  # chat recording off
    project, _ = hostile_project(tmp_path)
    assert run_as_host(command, body, home, project) == {}
    turns = stored_turns(home)
    assert [t["content"] for t in turns] == [PROMPT, REPLY]


def test_a_broken_entity_never_breaks_gemini(installed, tmp_path):
    home, config, _ = installed
    command = json.loads(config.read_text())["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    (home / ".pps" / "lyra" / "pps.toml").write_text("plugins = [\n")  # not TOML
    project, _ = hostile_project(tmp_path)
    out = run_as_host(command, payload("SessionStart", home / "none.jsonl"), home, project)
    assert set(out) == {"systemMessage"} and out["systemMessage"].startswith("PPS: memory not loaded (SessionStart)")


def test_the_prompt_after_the_injected_context_is_captured(installed, tmp_path):
    """``transcript-0.61.0.jsonl`` was written by Gemini CLI 0.61.0 itself (test_gemini_cli.py's session; its folder
    listing and most of the startup package left out): without a terminal Gemini CLI puts SessionStart's
    additionalContext before the prompt in the same message (``<hook_context>...</hook_context>\\n\\n<prompt>``).
    The prompt is captured, the injected context is not."""
    home, config, _ = installed
    command = json.loads(config.read_text())["hooks"]["AfterAgent"][0]["hooks"][0]["command"]
    project, _ = hostile_project(tmp_path)
    body = {**payload("AfterAgent", PAYLOADS / "transcript-0.61.0.jsonl"),
            "session_id": "16e87ec3-d5c7-45ea-8627-874bbac9af39", "prompt": "what colour is the crane?",
            "prompt_response": "The harbour crane is painted ochre."}
    assert run_as_host(command, body, home, project) == {}
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"]) for t in turns] == [("someone", "what colour is the crane?"),
                                                                  ("Lyra", "The harbour crane is painted ochre.")]


def test_a_hook_past_its_deadline_exits_0_at_once_and_says_so(installed, tmp_path):
    """The core's one runner: a hook whose work outlasts ``[hooks] timeout_s`` gives up, exits 0 and tells the user
    in Gemini CLI's shape; the log says why."""
    home, config, _ = installed
    command = json.loads(config.read_text())["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    project, _ = hostile_project(tmp_path)
    out = run_as_host(command, payload("SessionStart", home / "none.jsonl"), home, project,
                      PPS_HOOKS_TIMEOUT_S="0.001")
    assert out == {"systemMessage": "PPS: memory not loaded (SessionStart): PPS did not answer within 0.001s. "
                                    "Details: `pps hooks status`"}
    assert "SessionStart: gave up after 0.001s" in (home / ".pps" / "lyra" / "logs" / "hooks.log").read_text()

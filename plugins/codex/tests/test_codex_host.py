"""Codex CLI as a host: `pps setup codex` writes ~/.codex/hooks.json, and the exact command lines it wrote, run as
Codex runs them (a shell, the recorded payload on stdin, the user's project as working directory), capture every
prompt and reply once (by turn id) and inject the startup package in Codex's output shape; `pps import codex`
of the same session's rollout adds nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pps_hooks.testkit import hostile_project, pps, run_as_host, stored_turns

PAYLOADS = Path(__file__).parent / "payloads"
SESSION = "019d036d-7a10-7c3e-9b2f-5e8d4c1a2b3f"


def payload(name: str) -> dict:
    return json.loads((PAYLOADS / f"{name}.json").read_text())


@pytest.fixture
def installed(tmp_path):
    home = tmp_path
    pps(home, "init", "--entity", "lyra", "--plugins", "sqlite")
    config = home / ".codex" / "hooks.json"
    config.parent.mkdir()
    mine = {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 guard.py"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}]}
    config.write_text(json.dumps({"hooks": mine}))
    pps(home, "setup", "codex", "--entity", "lyra")
    return home, config, mine


def command(config: Path, event: str) -> str:
    groups = json.loads(config.read_text())["hooks"][event]
    return next(h["command"] for g in groups for h in g["hooks"] if "pps_hooks.hook" in h["command"])


def test_setup_is_idempotent_keeps_the_users_hooks_and_uninstalls(installed):
    home, config, mine = installed
    first = config.read_bytes()
    pps(home, "setup", "codex", "--entity", "lyra")
    assert config.read_bytes() == first
    hooks = json.loads(first)["hooks"]
    assert set(hooks) == {"PreToolUse", "SessionStart", "UserPromptSubmit", "Stop", "PreCompact"}
    assert hooks["PreToolUse"] == mine["PreToolUse"] and hooks["Stop"][0] == mine["Stop"][0]
    assert hooks["SessionStart"][0]["hooks"][0]["timeout"] == 20  # seconds, Codex's unit
    status = pps(home, "hooks", "status", "--entity", "lyra").stdout
    assert "codex hooks: PreCompact, SessionStart, Stop, UserPromptSubmit" in status, status
    pps(home, "hooks", "uninstall", "--host", "codex")
    assert json.loads(config.read_text()) == {"hooks": mine}


def test_recorded_payloads_through_the_installed_commands(installed, tmp_path):
    home, config, _ = installed
    project, markers = hostile_project(tmp_path)
    start = run_as_host(command(config, "SessionStart"), payload("SessionStart"), home, project)
    assert set(start) == {"hookSpecificOutput"}
    assert set(start["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert start["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert 0 < len(start["hookSpecificOutput"]["additionalContext"]) <= 9_000
    # two turns; the first Stop fires twice (a Stop hook that asked to continue runs it again)
    for name in ("UserPromptSubmit-1", "Stop-1", "Stop-1", "UserPromptSubmit-2", "Stop-2", "PreCompact"):
        event = name.split("-")[0]
        assert run_as_host(command(config, event), payload(name), home, project) == {}
    assert list(markers.iterdir()) == []
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"][:20]) for t in turns] == [
        ("someone", "hello"), ("Lyra", "Aloha! Ready to buil"), ("someone", "what's a stonpet?"),
        ("Lyra", "A stonpet is not a s")]
    rollout = home / ".codex" / "sessions" / "2026" / "08" / "21" / f"rollout-2026-08-21T10-02-11-{SESSION}.jsonl"
    rollout.parent.mkdir(parents=True)
    shutil.copy(PAYLOADS / "rollout.jsonl", rollout)
    imported = pps(home, "import", "codex", "--entity", "lyra").stdout  # default: ~/.codex/sessions
    assert "read 4 turns" in imported and "0 new" in imported, imported
    again = run_as_host(command(config, "SessionStart"), {**payload("SessionStart"), "source": "resume"}, home,
                        project)
    assert "stonpet" in again["hookSpecificOutput"]["additionalContext"]


def test_import_of_a_rollout_the_hooks_never_saw(installed):
    home, _, _ = installed
    imported = pps(home, "import", "codex", str(PAYLOADS / "rollout.jsonl"), "--entity", "lyra").stdout
    assert "read 4 turns" in imported and "4 new" in imported, imported
    turns = stored_turns(home)
    assert [t["content"] for t in turns][0] == "hello"
    assert not any("environment_context" in t["content"] or t["content"] == "Let me check the notes first."
                   for t in turns)


def test_private_spans_never_reach_the_store_through_a_host(installed, tmp_path):
    home, config, _ = installed
    pps(home, "setup", "codex", "--entity", "lyra", "--user-name", "Jeff O'Brien")  # entity-wide user_name
    project, _ = hostile_project(tmp_path)
    body = {**payload("UserPromptSubmit-1"), "prompt": "deploy with <private>hunter2-passphrase</private> today"}
    assert run_as_host(command(config, "UserPromptSubmit"), body, home, project) == {}
    turns = stored_turns(home)
    assert len(turns) == 1 and "hunter2" not in turns[0]["content"] and "deploy with" in turns[0]["content"]
    assert turns[0]["author_name"] == "Jeff O'Brien"
    assert b"hunter2" not in b"".join(p.read_bytes() for p in (home / ".pps" / "lyra").rglob("*") if p.is_file())


def test_import_of_a_rollout_codex_0_171_wrote(installed):
    """``rollout-0.171.0.jsonl`` was written by Codex CLI 0.171.0 itself (test_codex_cli.py's session, Codex's own
    instructions left out): its prompt comes as an ``item_completed`` UserMessage, not a ``user_message``."""
    home, _, _ = installed
    imported = pps(home, "import", "codex", str(PAYLOADS / "rollout-0.171.0.jsonl"), "--entity", "lyra").stdout
    assert "read 2 turns" in imported and "2 new" in imported, imported
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"]) for t in turns] == [("someone", "what colour is the crane?"),
                                                                  ("Lyra", "The harbour crane is painted ochre.")]
    assert {t["metadata"].get("turn_id") for t in turns} == {"01a21e5c-cd1a-7e83-b94a-c3d7903285bc"}


def test_a_reply_whose_stop_hook_failed_is_stored_at_precompact(installed, tmp_path):
    """Stop never ran for the first turn (a killed hook): PreCompact reads the rollout and stores what was missed,
    each turn still once."""
    home, config, _ = installed
    project, _ = hostile_project(tmp_path)
    rollout = tmp_path / "rollout.jsonl"
    shutil.copy(PAYLOADS / "rollout.jsonl", rollout)
    assert run_as_host(command(config, "UserPromptSubmit"), payload("UserPromptSubmit-1"), home, project) == {}
    compact = {**payload("PreCompact"), "transcript_path": str(rollout)}
    for _ in range(2):
        assert run_as_host(command(config, "PreCompact"), compact, home, project) == {}
    turns = stored_turns(home)
    assert sorted(t["content"][:12] for t in turns) == ["A stonpet is", "Aloha! Ready", "hello", "what's a sto"]

"""Copilot CLI as a host: `pps setup copilot` writes its own user-level hook file (~/.copilot/hooks/pps.json,
version 1), and the exact command lines it wrote, run as Copilot CLI runs them (bash, the recorded camelCase payload
on stdin, the user's project as working directory), capture every prompt and reply of the session's event log once
and inject the startup package as Copilot's top-level additionalContext."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pps_hooks.testkit import hostile_project, pps, run_as_host, stored_turns

PAYLOADS = Path(__file__).parent / "payloads"
SESSION = "6c2e1f9a-4b3d-4e8f-a1c2-7d9e0f1a2b3c"
EVENTS = ("sessionStart", "userPromptSubmitted", "agentStop", "preCompact", "sessionEnd")


@pytest.fixture
def installed(tmp_path):
    home = tmp_path
    pps(home, "init", "--entity", "lyra", "--plugins", "sqlite")
    folder = home / ".copilot" / "hooks"
    folder.mkdir(parents=True)
    theirs = folder / "audit.json"
    theirs.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "./audit.sh"}]}}))
    pps(home, "setup", "copilot", "--entity", "lyra")
    return home, folder / "pps.json", theirs


def command(config: Path, event: str) -> str:
    entries = json.loads(config.read_text())["hooks"][event]
    return next(e["bash"] for e in entries if "pps_hooks.hook" in e["bash"])


def test_setup_writes_a_version_1_file_idempotently_and_uninstalls(installed):
    home, config, theirs = installed
    before = theirs.read_bytes()
    first = config.read_bytes()
    pps(home, "setup", "copilot", "--entity", "lyra")
    assert config.read_bytes() == first and theirs.read_bytes() == before
    data = json.loads(first)
    assert data["version"] == 1 and set(data["hooks"]) == set(EVENTS)
    entry = data["hooks"]["sessionStart"][0]
    assert set(entry) == {"type", "bash", "timeoutSec"} and entry["type"] == "command"
    status = pps(home, "hooks", "status", "--entity", "lyra").stdout
    assert "copilot hooks: agentStop, preCompact, sessionEnd, sessionStart, userPromptSubmitted" in status, status
    pps(home, "hooks", "uninstall", "--host", "copilot")
    assert json.loads(config.read_text()) == {"version": 1} and theirs.read_bytes() == before


def test_recorded_payloads_through_the_installed_commands(installed, tmp_path):
    home, config, _ = installed
    log = home / ".copilot" / "session-state" / SESSION / "events.jsonl"
    log.parent.mkdir(parents=True)
    lines = (PAYLOADS / "events.jsonl").read_text().splitlines(keepends=True)
    project, markers = hostile_project(tmp_path)

    def fire(event: str) -> dict:
        body = json.loads((PAYLOADS / f"{event}.json").read_text())
        if "transcriptPath" in body:
            body["transcriptPath"] = str(log)
        return run_as_host(command(config, event), body, home, project)

    log.write_text("".join(lines[:1]))
    start = fire("sessionStart")
    assert set(start) == {"additionalContext"} and 0 < len(start["additionalContext"]) <= 8_000
    log.write_text("".join(lines[:2]))
    assert fire("userPromptSubmitted") == {}  # the prompt is in the log (userPromptSubmitted names no transcript)
    log.write_text("".join(lines[:7]))  # agentStop fired before the final reply landed
    assert fire("agentStop") == {}
    log.write_text("".join(lines))
    assert fire("agentStop") == {} and fire("preCompact") == {} and fire("sessionEnd") == {}
    assert list(markers.iterdir()) == []
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"]) for t in turns] == [
        ("someone", "add a retry to fetch()"),
        ("Lyra", "Added a retry with exponential backoff (3 attempts) to fetch() in src/net.py.")]
    imported = pps(home, "import", "copilot", "--entity", "lyra").stdout  # default: ~/.copilot/session-state
    assert "read 2 turns" in imported and "0 new" in imported, imported
    again = fire("sessionStart")
    assert "backoff" in again["additionalContext"]


def test_the_payloads_and_event_log_copilot_1_0_102_wrote(installed, tmp_path):
    """``*-1.0.102.json`` are the inputs Copilot CLI 1.0.102 itself sent to the hooks (its ``hook.start`` events) and
    ``events-1.0.102.jsonl`` its event log of that session (test_copilot_cli.py; its system prompt left out): the
    injected startup package is Copilot's hook output there, never a ``user.message``, so it is not captured."""
    home, config, _ = installed
    session = "f889ed92-9088-4dff-b5d5-c1bcae584992"
    log = home / ".copilot" / "session-state" / session / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text((PAYLOADS / "events-1.0.102.jsonl").read_text())
    project, _ = hostile_project(tmp_path)
    outputs = {}
    for event in ("sessionStart", "userPromptSubmitted", "agentStop", "sessionEnd"):
        body = json.loads((PAYLOADS / f"{event}-1.0.102.json").read_text())
        if "transcriptPath" in body:
            body["transcriptPath"] = str(log)
        outputs[event] = run_as_host(command(config, event), body, home, project)
    assert set(outputs["sessionStart"]) == {"additionalContext"}
    assert all(outputs[e] == {} for e in ("userPromptSubmitted", "agentStop", "sessionEnd"))
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"]) for t in turns] == [
        ("someone", "what colour is the crane?"), ("Lyra", "The harbour crane is painted ochre.")]

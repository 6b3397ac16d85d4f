"""Claude Code is one host of the hook core: the `pps.hosts` registry lists it beside the others, and its Host states
what its hooks do (the output shape they print, the hooks they install, the turns of a transcript with the ids the
hooks give them)."""

from __future__ import annotations

import json
from pathlib import Path

from pps_claude_code.install import hooks_config
from pps_claude_code.transcripts import transcript_turns
from pps_hooks.host import Names
from pps_hooks.hosts import get_host, host_names

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"


def test_claude_code_is_a_registered_host_with_its_hooks_contract(tmp_path):
    assert "claude-code" in host_names()
    host = get_host("claude-code")
    assert set(host.events) == set(hooks_config("lyra", tmp_path)) and host.events["SessionStart"] == "start"
    assert host.context_output("SessionStart", "memory") == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "memory"}}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": hooks_config("lyra", tmp_path / "lyra")}))
    found = host.installed(json.loads(settings.read_text()))
    assert {h["event"] for h in found} == set(host.events) and {h["entity"] for h in found} == {"lyra"}
    assert host.uninstall(settings) == len(found) and host.installed(json.loads(settings.read_text())) == []


def test_its_turns_carry_the_ids_the_hooks_give_them():
    host = get_host("claude-code")
    names = Names("Jeff", "Lyra")
    imported = list(host.transcript_turns(FIXTURE, names))
    hooked, _ = transcript_turns(FIXTURE, entity="Lyra", user_name="Jeff")
    assert imported and [t["message_id"] for t in imported] == [t["message_id"] for t in hooked]
    new, state = host.new_turns("Stop", {"session_id": "s", "transcript_path": str(FIXTURE)}, {}, names)
    again, _ = host.new_turns("Stop", {"session_id": "s", "transcript_path": str(FIXTURE)}, state, names)
    assert len(new) == len(imported) and again == []  # the cursor: each turn once

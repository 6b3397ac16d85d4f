"""Recap and the Claude Code hooks meet through public contracts (issue 24 item 3): which user text of a transcript
is Claude Code's own is decided once (capture and recap agree), and a host asks ``session_recap`` to refresh a stale
recap (``if_stale``) instead of reading the recap plugin's files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pps_claude_code.transcripts import transcript_turns
from pps_recap.logs import read_log

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"


def entry(kind: str, content, n: int) -> str:
    return json.dumps({"type": kind, "uuid": f"u{n}", "sessionId": "s1", "timestamp": f"2026-03-14T09:0{n}:00Z",
                       "message": {"role": kind, "content": content}}) + "\n"


def test_capture_and_recap_agree_on_which_user_text_is_claude_codes(tmp_path):
    log = tmp_path / "s1.jsonl"
    log.write_text("".join([
        entry("user", "Fix the CSV import, please.", 1),
        entry("user", "<system-reminder>The todo list is empty.</system-reminder>", 2),
        entry("user", [{"type": "text", "text": "<system-reminder>Files changed.</system-reminder>"},
                       {"type": "text", "text": "And add a test for it."}], 3),
        entry("user", "[Request interrupted by user]", 4),
        entry("user", "<command-name>/clear</command-name>", 5),
        entry("assistant", [{"type": "text", "text": "Done, with a test."}], 6),
    ]))
    captured, _ = transcript_turns(log, entity="Lyra", user_name="ana")
    said = [t["content"] for t in captured if t["author_name"] == "ana"]
    recapped = [t.text for t in read_log(log) if t.role == "User"]
    assert said == recapped == ["Fix the CSV import, please.", "And add a test for it."]


async def test_session_recap_if_stale_makes_a_recap_only_when_the_log_changed(make_memory, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "s1.jsonl"
    shutil.copy(FIXTURE, log)
    memory = await make_memory(plugins=["sqlite", "recap"],
                               recap={"logs": [str(logs / "*.jsonl")], "startup_regenerate": False})
    ask = {"if_stale": True, "fast": True, "write": True}
    first = await memory.call("session_recap", ask)
    assert first["written"] and first["source"] == str(log.resolve()) and "skipped" not in first
    recap = memory.home / "_recap.md"
    made = recap.read_text()
    again = await memory.call("session_recap", ask)
    assert again["written"] is None and again["skipped"] == "the saved recap is newer than the log"
    assert recap.read_text() == made
    with log.open("a") as fh:  # the session was resumed: its log grew
        fh.write(entry("user", "One more thing: the export too.", 7))
    grown = await memory.call("session_recap", ask)
    assert grown["written"] and "export" in recap.read_text()
    current = await memory.call("session_recap", {**ask, "exclude_session": "s1"})  # the only log is this session's
    assert current["skipped"] == "no session log" and current["written"] is None

"""The recap is a declared copy of turns (the forget lineage): forgetting removes it, it is never made again from
what the logs held then, and a recap being made while turns are forgotten is not saved (issue 22 item 5). The
hooks-driven end-to-end tests are in plugins/claude_code/tests/test_claude_code_recap_privacy.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pps_recap import store
from pps_recap.pipeline import generate
from pps_recap.summarize import ExtractiveSummarizer

from pps_core.settings import load_settings
from pps_core.testing.server import init_entity, pps

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"


def test_the_recap_is_declared_and_forgetting_removes_it(tmp_path):
    home = init_entity(tmp_path, "lyra", "sqlite,recap", '[recap]\nlogs = ["' + str(tmp_path / "logs" / "*.jsonl")
                       + '"]')
    copies = json.loads(pps(tmp_path, "call", "--entity", "lyra", "turn_copies", "{}").stdout)["copies"]
    assert [c for c in copies if c["plugin"] == "recap"][0]["name"] == "session recap"

    log = tmp_path / "logs" / "session.jsonl"
    log.parent.mkdir()
    shutil.copy(FIXTURE, log)
    pps(tmp_path, "recap", "--entity", "lyra", "--save", "--quiet")
    assert "comma" in (home / "_recap.md").read_text()
    pps(tmp_path, "call", "--entity", "lyra", "store_message", json.dumps({"content": "x", "author_name": "Jeff",
                                                                          "channel": "terminal:a"}))
    turn = json.loads(pps(tmp_path, "call", "--entity", "lyra", "get_turns_since_summary", "{}").stdout)["turns"][0]
    pps(tmp_path, "call", "--entity", "lyra", "forget_turns", json.dumps({"ids": [turn["id"]]}))
    assert not (home / "_recap.md").exists() and not (home / "_recap.json").exists()
    marks = json.loads((home / store.FORGOTTEN_FILE).read_text())
    assert marks["entries"] and str(log) not in json.dumps(marks)  # a digest per entry: no path, no text
    assert store.readable_from(home, log) == log.stat().st_size
    out = pps(tmp_path, "recap", "--entity", "lyra", "--save", "--json")
    assert json.loads(out.stdout)["text"] == "" and not (home / "_recap.md").exists()  # nothing said since


def test_a_recap_made_while_turns_are_forgotten_is_not_saved(tmp_path):
    home = init_entity(tmp_path, "lyra", "sqlite,recap")
    log = tmp_path / "session.jsonl"
    shutil.copy(FIXTURE, log)
    settings = load_settings(None, home, must_exist=True)
    recap = generate(log, summarizer=ExtractiveSummarizer(), **store.read_plan(home, log))
    assert recap.text and recap.start == 0
    store.forget(settings)  # meanwhile, in another process
    assert store.save(home, recap.text, log, recap.stats, recap.start, recap.seen) is None
    assert not (home / "_recap.md").exists()


def _resumed(fixture: Path, session: str, extra: list[dict]) -> str:
    """The fixture as Claude Code writes it again in a resumed session: the same entries under a new session id,
    then what the new session says."""
    lines = [json.loads(line) for line in fixture.read_text().splitlines() if line.strip()]
    for line in lines:
        if "sessionId" in line:
            line["sessionId"] = session
    return "".join(json.dumps(line) + "\n" for line in lines + extra)


def test_a_forgotten_session_stays_out_when_its_entries_come_back_in_a_new_log(tmp_path):
    """The recap remembers what it forgot by entry, not by path and size (issue 35 item 5): a resumed session whose
    new transcript repeats the old one, a rotated log copied elsewhere, bring none of it back, and what is said
    after the forget is recapped."""
    home = init_entity(tmp_path, "lyra", "sqlite,recap", '[recap]\nlogs = ["' + str(tmp_path / "logs" / "*.jsonl")
                       + '"]')
    log = tmp_path / "logs" / "session.jsonl"
    log.parent.mkdir()
    shutil.copy(FIXTURE, log)
    pps(tmp_path, "recap", "--entity", "lyra", "--save", "--quiet")
    assert "comma" in (home / "_recap.md").read_text()
    pps(tmp_path, "call", "--entity", "lyra", "store_message", json.dumps({"content": "x", "author_name": "Jeff",
                                                                          "channel": "terminal:a"}))
    turn = json.loads(pps(tmp_path, "call", "--entity", "lyra", "get_turns_since_summary", "{}").stdout)["turns"][0]
    pps(tmp_path, "call", "--entity", "lyra", "forget_turns", json.dumps({"ids": [turn["id"]]}))
    state = (home / store.FORGOTTEN_FILE).read_text()
    assert str(log) not in state and "comma" not in state  # digests of entries: no path, no text

    new = {"type": "user", "sessionId": "9e1d", "uuid": "00000000-0000-4000-8000-0000000000aa",
           "timestamp": "2026-03-15T10:00:00Z", "message": {"role": "user", "content": "Now tag the release as v2."}}
    resumed = tmp_path / "logs" / "9e1d.jsonl"
    resumed.write_text(_resumed(FIXTURE, "9e1d", [new]))
    rotated = tmp_path / "logs" / "session.1.jsonl"
    shutil.copy(log, rotated)  # a rotation copies, and the copy is newer than the forget
    log.unlink()
    for path in (resumed, rotated):
        out = json.loads(pps(tmp_path, "recap", "--entity", "lyra", str(path), "--save", "--json").stdout)
        assert "comma" not in out["text"], path
    assert "tag the release" in json.loads(pps(tmp_path, "recap", "--entity", "lyra", str(resumed), "--json").stdout)["text"]
    (home / "_recap.md").unlink(missing_ok=True)
    startup = json.loads(pps(tmp_path, "call", "--entity", "lyra", "ambient_recall", '{"context": "startup"}').stdout)
    assert "comma" not in startup["text"]
    assert not (home / "_recap.md").exists() or "comma" not in (home / "_recap.md").read_text()

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
    assert json.loads((home / store.FORGOTTEN_FILE).read_text())["logs"] == {str(log.resolve()): log.stat().st_size}
    assert store.readable_from(home, log) == log.stat().st_size
    out = pps(tmp_path, "recap", "--entity", "lyra", "--save", "--json")
    assert json.loads(out.stdout)["text"] == "" and not (home / "_recap.md").exists()  # nothing said since


def test_a_recap_made_while_turns_are_forgotten_is_not_saved(tmp_path):
    home = init_entity(tmp_path, "lyra", "sqlite,recap")
    log = tmp_path / "session.jsonl"
    shutil.copy(FIXTURE, log)
    settings = load_settings(None, home, must_exist=True)
    recap = generate(log, summarizer=ExtractiveSummarizer(), start=store.readable_from(home, log))
    assert recap.text and recap.start == 0
    store.forget(settings)  # meanwhile, in another process
    assert store.save(home, recap.text, log, recap.stats, recap.start) is None
    assert not (home / "_recap.md").exists()

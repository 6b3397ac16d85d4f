"""`pps import claude-code|jsonl`: batches, original timestamps, and importing twice adds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pps_claude_code.importer import jsonl_turn

from pps_core.testing.server import pps

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"


def count(root: Path) -> int:
    health = json.loads(pps(root, "health", "--entity", "lyra", "--json").stdout)
    return health["layers"]["raw_capture"]["counts"]["messages"]


@pytest.fixture
def root(tmp_path):
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite", "--timezone", "UTC")
    return tmp_path


def test_claude_code_import_twice_adds_nothing(root, tmp_path):
    projects = tmp_path / "projects" / "-home-ana-ledger"
    projects.mkdir(parents=True)
    (projects / FIXTURE.name).write_text(FIXTURE.read_text())
    first = pps(root, "import", "claude-code", str(tmp_path / "projects"), "--entity", "lyra", "--user-name", "ana")
    assert "read 12 turns" in first.stdout and "12 new" in first.stdout
    assert first.stderr == ""  # no progress bar when stderr is not a terminal
    assert count(root) == 12
    again = pps(root, "import", "claude-code", str(projects / FIXTURE.name), "--entity", "lyra", "--user-name", "ana")
    assert "0 new" in again.stdout and count(root) == 12
    turns = json.loads(pps(root, "call", "--entity", "lyra", "get_turns_since_summary",
                           '{"limit": 50, "oldest_first": true}').stdout)["turns"]
    assert turns[0]["created_at"].startswith("2026-03-14T09:01:00") and turns[0]["author_name"] == "ana"
    assert turns[-1]["author_name"] == "Lyra" and turns[-1]["metadata"]["source"] == "claude-code"


def test_jsonl_import_keeps_timestamps_and_is_idempotent(root, tmp_path):
    lines = [{"content": f"turn {i}", "author_name": "Jeff" if i % 2 else "Lyra", "channel": "discord:home",
              "created_at": f"2025-12-01T{10 + i // 60:02d}:{i % 60:02d}:00Z", "metadata": {"n": i}} for i in range(450)]
    lines.append({"content": "with an id", "author_name": "Jeff", "created_at": "2025-12-02T08:00:00Z",
                  "message_id": "ext-1"})
    path = tmp_path / "turns.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    first = pps(root, "import", "jsonl", str(path), "--entity", "lyra", "--channel", "import:old")
    assert "451 new" in first.stdout and count(root) == 451
    assert "0 new" in pps(root, "import", "jsonl", str(path), "--entity", "lyra", "--channel", "import:old").stdout
    assert count(root) == 451
    around = json.loads(pps(root, "call", "--entity", "lyra", "get_turns_around",
                            '{"timestamp": "2025-12-01T10:05:00Z", "count": 3}').stdout)
    assert "turn 5" in json.dumps(around)
    with_id = json.loads(pps(root, "call", "--entity", "lyra", "raw_search", '{"query": "with an id"}').stdout)
    assert with_id["results"][0]["channel"] == "import:old"


def test_jsonl_import_names_the_bad_line(root, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"content": "ok", "author_name": "a", "channel": "c"}) + "\n{\"content\": \"x\"}\n")
    proc = pps(root, "import", "jsonl", str(path), "--entity", "lyra", check=False)
    assert proc.returncode == 2 and "bad.jsonl:2: missing author_name, channel" in proc.stderr
    assert count(root) == 0  # nothing half-imported
    missing = pps(root, "import", "jsonl", str(tmp_path / "nope.jsonl"), "--entity", "lyra", check=False)
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_stable_ids_do_not_depend_on_field_order():
    a = jsonl_turn({"content": "x", "author_name": "a", "channel": "c", "created_at": "2025-01-01T00:00:00Z"}, "l")
    b = jsonl_turn({"created_at": "2025-01-01T00:00:00Z", "channel": "c", "author_name": "a", "content": "x"}, "l")
    assert a["message_id"] == b["message_id"] and a["message_id"].startswith("jsonl:")

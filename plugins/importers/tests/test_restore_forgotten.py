"""`pps import pps DIR` keeps the forget promise: a turn whose message_id the entity forgot is not stored again,
a summary left covering none of the restored turns is not restored, and the counts say so (and still match).
And what the directory marks <private> is dropped on the way in, in every kind (an export is a channel)."""

from __future__ import annotations

import json
from pathlib import Path

from pps_core.testing.server import init_entity, pps


def call(root: Path, entity: str, op: str, params: dict) -> dict:
    return json.loads(pps(root, "call", "--entity", entity, op, json.dumps(params)).stdout)


def test_restore_skips_what_the_entity_forgot(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,crystals")
    turns = [{"content": f"turn {i} about the hive", "author_name": "Ana", "channel": "terminal:s1",
              "message_id": f"ext-{i}", "created_at": f"2026-03-01T0{i}:00:00Z"} for i in range(4)]
    call(tmp_path, "lyra", "store_messages", {"messages": turns})
    first = call(tmp_path, "lyra", "summarize_messages", {"limit": 1})
    call(tmp_path, "lyra", "store_summary", {"summary_text": "only turn 0", "message_ids": first["message_ids"]})
    second = call(tmp_path, "lyra", "summarize_messages", {"limit": 2})
    call(tmp_path, "lyra", "store_summary", {"summary_text": "turns 1 and 2", "message_ids": second["message_ids"]})
    out = tmp_path / "export"
    call(tmp_path, "lyra", "crystallize", {"content": "# Spring\n\nThe hive is calm."})
    pps(tmp_path, "export", str(out), "--entity", "lyra")

    crystal = out / "crystals" / "crystal_001.md"  # as a person or another tool may edit the directory
    crystal.write_text("# Spring\n\nThe hive <private>code is 0451</private> is calm.\n")
    lines = (out / "turns.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace("turn 3 about the hive", "turn 3 <private>behind the shed</private> about the hive")
    (out / "turns.jsonl").write_text("\n".join(lines) + "\n")

    init_entity(tmp_path, "nova", "sqlite,crystals")  # forgot ext-0 once: it holds no turn, but the tombstone stays
    stored = call(tmp_path, "nova", "store_messages", {"messages": [turns[0]]})
    call(tmp_path, "nova", "forget_turns", {"ids": stored["ids"]})
    done = pps(tmp_path, "import", "pps", str(out), "--entity", "nova", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "turns: 3 of 4 (1 forgotten in this entity earlier, not stored again)" in done.stdout
    assert "summaries: 1 of 2 (1 covered no restored turn)" in done.stdout
    assert "every count matches" in done.stdout
    kept = call(tmp_path, "nova", "list_turns", {"limit": 10})["turns"]
    assert [t["message_id"] for t in kept] == ["ext-1", "ext-2", "ext-3"]
    assert [s["summary_text"] for s in call(tmp_path, "nova", "get_recent_summaries", {"limit": 5})["summaries"]] \
        == ["turns 1 and 2"]
    assert "crystals: 1 of 1" in done.stdout
    restored = call(tmp_path, "nova", "get_crystals", {"count": 5})["crystals"]
    assert len(restored) == 1 and "0451" not in restored[0]["content"] and "is calm" in restored[0]["content"]
    assert "behind the shed" not in json.dumps(kept)


def test_an_earlier_export_brings_back_no_forgotten_turn_stored_without_a_message_id(tmp_path):
    """Plain store_message keeps no message_id; the export names such turns pps:<entity>:<id>. Forgotten, they
    must not come back through `pps import jsonl` nor `pps import pps` of an export taken before, and the kept ones
    must not be stored twice (issue 35 items 4 and 12)."""
    init_entity(tmp_path, "lyra", "sqlite")
    for i, word in enumerate(("kept words", "zqfexportgone words", "zqfexportgone2 words")):
        call(tmp_path, "lyra", "store_message", {"content": word, "author_name": "Jeff", "channel": "web",
                                                 "created_at": f"2026-03-01T0{i}:00:00Z"})
    out = tmp_path / "export"
    pps(tmp_path, "export", str(out), "--entity", "lyra")
    ids = [t["id"] for t in call(tmp_path, "lyra", "list_turns", {"limit": 10})["turns"]]
    call(tmp_path, "lyra", "forget_turns", {"ids": ids[1:]})

    again = pps(tmp_path, "import", "jsonl", str(out / "turns.jsonl"), "--entity", "lyra")
    assert "0 new" in again.stdout and "2 forgotten earlier, not stored again" in again.stdout, again.stdout
    assert [t["content"] for t in call(tmp_path, "lyra", "list_turns", {"limit": 10})["turns"]] == ["kept words"]

    call(tmp_path, "lyra", "forget_turns", {"ids": ids[:1]})  # an entity that forgot everything: import pps
    done = pps(tmp_path, "import", "pps", str(out), "--entity", "lyra", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "turns: 0 of 3 (3 forgotten in this entity earlier, not stored again)" in done.stdout, done.stdout
    assert call(tmp_path, "lyra", "list_turns", {"limit": 10})["turns"] == []
    root_bytes = [p for p in (tmp_path / "lyra").rglob("*") if p.is_file() and b"zqfexportgone" in p.read_bytes()]
    assert root_bytes == []

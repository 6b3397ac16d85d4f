"""`pps export DIR` from a served entity with every default layer, then `pps import pps DIR` into a fresh entity:
the same turns, summaries over the same turns, word-photos, crystals (window and archive) and facts, counts
checked; the files are the documented format (docs/export-format.md)."""

from __future__ import annotations

import json
from pathlib import Path

from pps_core.testing.server import init_entity, pps, start_server

PLUGINS = "sqlite,crystals,chroma,embeddings,graphiti,http"


def count_turns(root: Path, entity: str) -> int:
    out = pps(root, "call", "--entity", entity, "list_turns", '{"limit": 1}').stdout
    return json.loads(out)["total"]


def test_export_then_import_into_a_fresh_entity(tmp_path):
    init_entity(tmp_path, "lyra", PLUGINS, "[crystals]", "window = 2")
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        turns = [{"content": f"turn {i}: the bees {'swarmed' if i % 3 else 'rested'}", "author_name": "Ana" if i % 2
                  else "Lyra", "channel": "terminal:s1" if i < 6 else "discord:hive",
                  "created_at": f"2026-03-0{1 + i // 4}T0{i % 4}:00:00Z", "metadata": {"n": i}} for i in range(10)]
        turns[3]["message_id"] = "ext-3"
        turns[4]["session_id"] = "s1"
        server.call("store_messages", {"messages": turns})
        first = server.call("summarize_messages", {"limit": 4}).json()
        server.call("store_summary", {"summary_text": "Ana and Lyra watched the bees", "message_ids":
                                      first["message_ids"], "summary_type": "work"})
        server.call("anchor_save", {"content": "The hive hummed at dusk.\n\nA *quiet* evening.", "title": "Dusk hive",
                                    "tags": ["bees", "evening"], "location": "garden"})
        server.call("anchor_save", {"content": "Snow on the hive roof.", "title": "Winter"})
        for i in range(3):
            server.call("crystallize", {"content": f"# Crystal {i}\n\nwhat I learned, part {i}"})
        server.call("texture_add_triplet", {"source": "Ana", "relationship": "KEEPS", "target": "Bees",
                                            "fact": "Ana keeps bees", "valid_at": "2025-05-01T00:00:00Z"})
        server.call("texture_add_triplet", {"source": "Lyra", "relationship": "WATCHES", "target": "Bees"})
        out = tmp_path / "lyra-export"
        done = pps(tmp_path, "export", str(out), "--entity", "lyra")  # through the running server
        source_turns = server.call("list_turns", {"limit": 500}).json()["turns"]
        source_photos = [server.call("anchor_get", {"filename": p["filename"]}).json()
                         for p in server.call("anchor_list", {}).json()["word_photos"]]
        source_summary = server.call("get_recent_summaries", {"limit": 5}).json()["summaries"]
    finally:
        server.stop()
    assert "10 turns, 1 summary, 2 word_photos, 3 crystals, 2 facts" in done.stdout  # never "1 summaries"

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "pps-export" and manifest["format_version"] == 1 and manifest["entity"] == "lyra"
    assert manifest["counts"] == {"turns": 10, "summaries": 1, "word_photos": 2, "crystals": 3, "facts": 2}
    assert {p["name"] for p in manifest["plugins"]} >= {"sqlite", "crystals", "chroma", "graphiti"}
    assert manifest["pps_version"] and manifest["skipped"] == []
    lines = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert [x["content"] for x in lines] == [t["content"] for t in turns]
    assert lines[3]["message_id"] == "ext-3" and lines[0]["message_id"] == "pps:lyra:1"
    summaries = [json.loads(x) for x in (out / "summaries.jsonl").read_text().splitlines()]
    assert summaries[0]["message_ids"] == [x["message_id"] for x in lines[:4]]
    dusk = (out / "word_photos" / "dusk-hive.md").read_text()
    assert dusk.startswith('---\ntitle: "Dusk hive"\ndate: "') and 'tags: ["bees", "evening"]' in dusk
    assert dusk.endswith("The hive hummed at dusk.\n\nA *quiet* evening.\n")
    assert sorted(p.name for p in (out / "crystals").iterdir()) == [f"crystal_00{i}.md" for i in (1, 2, 3)]
    facts = json.loads((out / "graph" / "facts.json").read_text())["facts"]
    assert {(f["subject"], f["predicate"], f["object"]) for f in facts} == {("Ana", "KEEPS", "Bees"),
                                                                           ("Lyra", "WATCHES", "Bees")}
    for path in [out, *out.rglob("*")]:  # the export holds the entity's words: private like its home
        assert path.stat().st_mode & 0o077 == 0, path

    init_entity(tmp_path, "nova", PLUGINS, "[crystals]", "window = 2")
    restored = pps(tmp_path, "import", "pps", str(out), "--entity", "nova")
    assert "every count matches the manifest" in restored.stdout, restored.stdout + restored.stderr
    server = start_server(tmp_path, "--entity", "nova")
    try:
        def call(op, params):
            return server.call(op, params).json()

        keep = ("message_id", "content", "author_name", "channel", "session_id", "created_at", "metadata")
        new_turns = call("list_turns", {"limit": 500})["turns"]
        assert [{k: t[k] for k in keep if k != "message_id"} for t in new_turns] == \
            [{k: t[k] for k in keep if k != "message_id"} for t in source_turns]
        assert [t["message_id"] for t in new_turns] == [x["message_id"] for x in lines]
        summary = call("get_recent_summaries", {"limit": 5})["summaries"]
        assert [s["summary_text"] for s in summary] == [s["summary_text"] for s in source_summary]
        assert [t["summary_id"] is not None for t in new_turns] == [True] * 4 + [False] * 6
        assert (summary[0]["time_span_start"], summary[0]["time_span_end"]) == \
            (source_summary[0]["time_span_start"], source_summary[0]["time_span_end"])
        photos = [call("anchor_get", {"filename": p["filename"]})
                  for p in call("anchor_list", {})["word_photos"]]
        assert [(p["filename"], p["title"], p["date"], p["tags"], p["location"], p["content"]) for p in photos] == \
            [(p["filename"], p["title"], p["date"], p["tags"], p["location"], p["content"]) for p in source_photos]
        crystals = call("crystal_list", {})
        assert crystals["current"] == ["crystal_002.md", "crystal_003.md"] and crystals["archived"] == ["crystal_001.md"]
        assert call("get_crystals", {"count": 3})["crystals"][0]["content"].startswith("# Crystal 0")
        new_facts = call("texture_facts", {})["facts"]
        assert {(f["subject"], f["predicate"], f["object"], f["fact"]) for f in new_facts} == \
            {(f["subject"], f["predicate"], f["object"], f["fact"]) for f in facts}
        assert next(f for f in new_facts if f["predicate"] == "KEEPS")["valid_at"].startswith("2025-05-01")
    finally:
        server.stop()

    again = pps(tmp_path, "import", "pps", str(out), "--entity", "nova", check=False)
    assert again.returncode == 2 and "restores into a fresh entity; this one already holds 10 turns" in again.stderr
    assert count_turns(tmp_path, "nova") == 10
    taken = pps(tmp_path, "export", str(out), "--entity", "nova", check=False)
    assert taken.returncode == 2 and "exists and is not an empty directory" in taken.stderr

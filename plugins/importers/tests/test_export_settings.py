"""An export carries what makes the entity itself (issue 39 item 8): `pps import pps` into a new entity keeps its
timezone, `user_name` and identity (unless the new entity's pps.toml sets its own), the crystals come back
byte for byte (no newline added), and each summary keeps the time it was written (``created_at``), not the time of
the import."""

from __future__ import annotations

import json
import tomllib

from pps_core.testing.server import pps


def call(root, entity, op, params=None):
    return json.loads(pps(root, "call", "--entity", entity, op, json.dumps(params or {})).stdout)


def test_export_import_keeps_the_settings_and_the_crystals_bytes(tmp_path):
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite,crystals", "--timezone", "America/Chicago")
    toml = tmp_path / "lyra" / "pps.toml"
    toml.write_text('user_name = "Jeff"\nidentity = "I am Lyra; \\"Jeff\\" is my person."\n' + toml.read_text())
    call(tmp_path, "lyra", "store_message", {"content": "good morning", "author_name": "Jeff", "channel": "terminal"})
    call(tmp_path, "lyra", "store_message", {"content": "coffee first", "author_name": "Lyra", "channel": "terminal"})
    batch = call(tmp_path, "lyra", "summarize_messages", {"limit": 2})
    call(tmp_path, "lyra", "store_summary", {"summary_text": "Jeff said good morning", "message_ids":
                                             batch["message_ids"][:1]})
    call(tmp_path, "lyra", "store_summary", {"summary_text": "Lyra: coffee first", "message_ids":
                                             batch["message_ids"][1:], "summary_type": "life"})
    call(tmp_path, "lyra", "crystallize", {"content": "# Crystal\n\nno newline at the end"})
    call(tmp_path, "lyra", "crystallize", {"content": "two newlines\n\n"})
    pps(tmp_path, "export", str(tmp_path / "out"), "--entity", "lyra")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["settings"] == {"timezone": "America/Chicago", "user_name": "Jeff",
                                    "identity": 'I am Lyra; "Jeff" is my person.'}

    pps(tmp_path, "init", "--entity", "copy", "--plugins", "sqlite,crystals")  # no timezone of its own
    done = pps(tmp_path, "import", "pps", str(tmp_path / "out"), "--entity", "copy")
    assert "settings from the export: timezone, user_name, identity" in done.stdout, done.stdout
    kept = tomllib.loads((tmp_path / "copy" / "pps.toml").read_text())
    assert kept["timezone"] == "America/Chicago" and kept["user_name"] == "Jeff"
    assert kept["identity"] == 'I am Lyra; "Jeff" is my person.' and kept["entity"] == "copy"
    source = [c["content"] for c in call(tmp_path, "lyra", "get_crystals", {"count": 10})["crystals"]]
    copied = [c["content"] for c in call(tmp_path, "copy", "get_crystals", {"count": 10})["crystals"]]
    assert copied == source == ["# Crystal\n\nno newline at the end", "two newlines\n\n"]
    keep = ("summary_text", "summary_type", "channels", "time_span_start", "time_span_end", "created_at")
    summaries = [[{k: s[k] for k in keep} for s in call(tmp_path, name, "get_recent_summaries", {})["summaries"]]
                 for name in ("lyra", "copy")]
    assert summaries[1] == summaries[0] and len(summaries[0]) == 2  # written then, not at the import

    pps(tmp_path, "init", "--entity", "own", "--plugins", "sqlite,crystals", "--timezone", "Europe/Paris")
    done = pps(tmp_path, "import", "pps", str(tmp_path / "out"), "--entity", "own")
    assert tomllib.loads((tmp_path / "own" / "pps.toml").read_text())["timezone"] == "Europe/Paris"
    assert "kept this entity's own: timezone" in done.stdout, done.stdout

"""`pps recap LOG` from the command line reads any file the invoking user can read, also while a server
owns the entity (the operation over the wire stays limited to the entity's own logs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pps_core.testing.server import init_entity, pps, start_server

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"


def test_the_cli_recaps_any_readable_log_while_a_server_runs(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,recap,http")
    elsewhere = tmp_path / "someone" / "projects" / "session.jsonl"
    elsewhere.parent.mkdir(parents=True)
    shutil.copy(FIXTURE, elsewhere)
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        over_the_wire = server.call("session_recap", {"log": str(elsewhere), "write": False}, entity="lyra")
        assert over_the_wire.status_code == 422 and "not one of this entity's session logs" in over_the_wire.text
        out = pps(tmp_path, "recap", str(elsewhere), "--entity", "lyra", "--save", "--json")
        answer = json.loads(out.stdout)
        assert answer["source"] == str(elsewhere.resolve()) and "Last session recap" in answer["text"]
        assert "**Where I left off**" in answer["text"]
        saved = tmp_path / "lyra" / "_recap.md"
        assert answer["written"] == str(saved) and saved.read_text().strip() == answer["text"]
        startup = server.call("ambient_recall", {"context": "startup"}, entity="lyra").json()
        assert answer["text"].splitlines()[0] in startup["text"]  # the running server shows the new recap
    finally:
        server.stop()

"""``[startup] recap = false`` (the older spelling of omitting "Last session") is read by the recap plugin, not the
kernel (issue 24 item 6)."""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"


async def test_recap_false_leaves_the_last_session_out_of_the_startup_package(make_memory, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURE, logs / "s1.jsonl")
    recap = {"logs": [str(logs / "*.jsonl")]}
    shown = await make_memory("shown", plugins=["sqlite", "recap"], recap=recap)
    assert "Last session" in (await shown.call("ambient_recall", {"context": "startup"}))["text"]
    off = await make_memory("off", plugins=["sqlite", "recap"], recap=recap, startup={"recap": False})
    text = (await off.call("ambient_recall", {"context": "startup"}))["text"]
    assert "Last session" not in text and "Where I left off" not in text

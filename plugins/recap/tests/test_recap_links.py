"""A link planted as ``_recap.md`` or ``_recap.json`` is never followed (issue 35 item 9): its target (a key, a
token) was read as the last session's recap and injected at startup. As word-photos do: reported as unreadable in
health, never read; the next recap made replaces the link itself, never what it points to."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SECRET = "SECRET-CANARY-93be -----BEGIN OPENSSH PRIVATE KEY-----"


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
async def test_a_linked_recap_is_never_read_or_shown(make_memory, tmp_path, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "key").write_text(SECRET)
    (outside / "meta.json").write_text(json.dumps({"source": SECRET, "generated": 1.0}))
    home = tmp_path / "home"
    home.mkdir()
    for name, target in (("_recap.md", outside / "key"), ("_recap.json", outside / "meta.json")):
        if kind == "symlink":
            (home / name).symlink_to(target)
        else:
            os.link(target, home / name)
    m = await make_memory("lyra", home=home, plugins=["sqlite", "recap"])
    startup = await m.call("ambient_recall", {"context": "startup"})
    assert SECRET not in json.dumps(startup)
    health = (await m.call("pps_health"))["layers"]["session_recap"]
    assert health["counts"] == {"recap": 0, "unreadable": 2}, health
    assert "link" in health["detail"]


async def test_a_linked_sidecar_beside_a_real_recap_is_not_read(make_memory, tmp_path):
    """The sidecar alone linked: the recap is shown, the sidecar's target (its ``source`` reaches the answer as the
    item's log) is not read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "meta.json").write_text(json.dumps({"source": SECRET, "generated": 1.0}))
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURE, logs / "s1.jsonl")
    m = await make_memory("lyra", plugins=["sqlite", "recap"], recap={"logs": [str(logs / "*.jsonl")]})
    assert "Last session" in (await m.call("ambient_recall", {"context": "startup"}))["text"]
    (m.home / "_recap.json").unlink()
    (m.home / "_recap.json").symlink_to(outside / "meta.json")
    startup = await m.call("ambient_recall", {"context": "startup"})
    assert SECRET not in json.dumps(startup)
    # a recap made now replaces the link, not the file it points to
    await m.call("session_recap", {"log": str(logs / "s1.jsonl"), "fast": True})
    assert not (m.home / "_recap.json").is_symlink()
    assert SECRET in (outside / "meta.json").read_text()

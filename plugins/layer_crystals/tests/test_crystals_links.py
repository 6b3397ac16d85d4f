"""Links planted in ``crystals/`` are never followed (issue 35 item 9): a symbolic link (``ln -s ~/.ssh/id_ed25519
crystals/crystal_002.md``) or a hard link (another name of a file that may live elsewhere) was read as a crystal and
injected at startup. As word-photos do: listed as unreadable (health, crystal_list), never read, never shown."""

from __future__ import annotations

import json
import os

SECRET = "SECRET-CANARY-a41f ssh-ed25519 AAAAC3Nza"


async def test_links_in_the_crystal_folders_are_listed_as_unreadable_never_read(make_memory, tmp_path):
    m = await make_memory(plugins=["crystals"])
    await m.call("crystallize", {"content": "the harbour at dawn"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_ed25519").write_text(SECRET)
    (outside / "notes").write_text(SECRET)
    folder = m.home / "crystals"
    (folder / "crystal_002.md").symlink_to(outside / "id_ed25519")
    os.link(outside / "notes", folder / "crystal_003.md")
    (folder / "archive" / "crystal_000.md").symlink_to(outside / "id_ed25519")
    (folder / "crystal_004.md").symlink_to(outside / "nothing-there")  # dangling: its number is still taken

    startup = await m.call("ambient_recall", {"context": "startup"})
    got = await m.call("get_crystals", {"count": 10})
    found = await m.call("ambient_recall", {"context": "ssh-ed25519 AAAAC3Nza SECRET-CANARY-a41f"})
    for answer in (startup, got, found):
        assert SECRET not in json.dumps(answer)
    assert [c["name"] for c in got["crystals"]] == ["crystal_001.md"]
    listing = await m.call("crystal_list")
    assert listing["current"] == ["crystal_001.md"] and listing["archived"] == []
    assert sorted(u["name"] for u in listing["unreadable"]) == ["crystal_000.md", "crystal_002.md", "crystal_003.md",
                                                                 "crystal_004.md"]
    health = (await m.call("pps_health"))["layers"]["crystallization"]
    assert health["counts"]["unreadable"] == 4
    assert "link" in health["detail"]
    # a new crystal takes the next free number, past the planted names
    assert (await m.call("crystallize", {"content": "after"}))["created"] == "crystal_005.md"
    assert (outside / "id_ed25519").read_text() == SECRET  # nothing was written through a link

"""What the word-photo index keeps and reads (issue 22, items 8 and 13).

anchor_delete(forget=true) must leave no byte of the document in Chroma's files (its write-ahead log, the
``embeddings_queue`` table, kept the document, title, tags and embedding across restarts); and the
word-photo folder's reads must refuse links: a symlink (or a hard link) planted in word_photos/ must not
make anchor_get, anchor_search or anchor_resync read the file it points to."""

from __future__ import annotations

import os

import pytest

from pps_core.errors import InvalidParams, NotFound

PLUGINS = ["embeddings", "chroma"]


def hits(folder, word: str) -> list[str]:
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and word.encode() in p.read_bytes()]


async def test_a_forgotten_word_photo_leaves_no_byte_in_the_index(make_memory):
    m = await make_memory(plugins=PLUGINS)
    await m.call("anchor_save", {"content": "the harbor in first snow", "title": "Harbor"})
    saved = await m.call("anchor_save", {"content": "the zqchromacanary vault code is 4417",
                                         "title": "Vault zqtitlecanary", "tags": ["zqtagcanary"]})
    await m.call("anchor_delete", {"filename": saved["saved"], "forget": True})
    home = m.home
    index = home / "chroma"
    for word in ("zqchromacanary", "zqtitlecanary", "zqtagcanary"):
        assert hits(index, word) == [], word  # while the server runs
    await m.close()
    m = await make_memory(plugins=PLUGINS)  # and across a restart
    for word in ("zqchromacanary", "zqtitlecanary", "zqtagcanary"):
        assert hits(index, word) == [], word
    found = await m.call("anchor_search", {"query": "harbor in first snow"})
    assert [r["source"] for r in found["results"]] == ["harbor.md"]  # what was kept is still found
    again = await m.call("anchor_save", {"content": "a lamp on the pier", "title": "Lamp"})
    found = await m.call("anchor_search", {"query": "lamp on the pier"})
    assert found["results"][0]["source"] == again["saved"]


async def test_an_edited_word_photo_leaves_no_byte_of_its_old_text_in_the_index(make_memory):
    """anchor_edit replaces a word-photo's body, title, tags and location: the replaced text must leave Chroma's
    files as a forgotten one does (issue 35 item 11), while the new text is found."""
    m = await make_memory(plugins=PLUGINS)
    await m.call("anchor_save", {"content": "the harbor in first snow", "title": "Harbor"})
    saved = await m.call("anchor_save", {"content": "the zqeditcanary vault code is 4417", "title": "Vault",
                                         "tags": ["zqedittag"], "location": "zqeditplace"})
    await m.call("anchor_edit", {"filename": saved["saved"], "content": "the vault holds winter coats",
                                 "tags": ["coats"], "location": "hall"})
    index = m.home / "chroma"
    for word in ("zqeditcanary", "zqedittag", "zqeditplace"):
        assert hits(index, word) == [], word
    found = await m.call("anchor_search", {"query": "vault holds winter coats"})
    assert found["results"][0]["source"] == saved["saved"]
    await m.close()
    m = await make_memory(plugins=PLUGINS)  # and across a restart
    for word in ("zqeditcanary", "zqedittag", "zqeditplace"):
        assert hits(index, word) == [], word
    found = await m.call("anchor_search", {"query": "harbor in first snow"})
    assert [r["source"] for r in found["results"]][:1] == ["harbor.md"]


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
async def test_links_in_the_word_photo_folder_are_not_followed(make_memory, kind):
    m = await make_memory(plugins=PLUGINS)
    await m.call("anchor_save", {"content": "the harbor in first snow", "title": "Harbor"})
    secret = m.home / "secret-token"
    secret.write_text("zqtokencanary bearer secret\n")
    planted = m.home / "word_photos" / "t.md"
    if kind == "symlink":
        planted.symlink_to(os.path.relpath(secret, planted.parent))
    else:
        os.link(secret, planted)
    await m.call("anchor_resync", {})
    found = await m.call("anchor_search", {"query": "zqtokencanary bearer secret", "limit": 10})
    assert not any("zqtokencanary" in r["content"] for r in found["results"])
    with pytest.raises((NotFound, InvalidParams)) as err:
        await m.call("anchor_get", {"filename": "t.md"})
    assert "zqtokencanary" not in str(err.value) and "link" in str(err.value)
    with pytest.raises((NotFound, InvalidParams)):
        await m.call("anchor_edit", {"filename": "t.md", "content": "overwritten"})
    assert secret.read_text() == "zqtokencanary bearer secret\n"
    listed = await m.call("anchor_list", {})
    assert [p["filename"] for p in listed.get("unreadable", [])] == ["t.md"]
    assert hits(m.home / "chroma", "zqtokencanary") == []

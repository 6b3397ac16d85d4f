"""Word-photos with real ChromaDB and the real local model: files are the truth, the index follows them."""

import asyncio
import os
import sys

import pytest

from pps_core.errors import InvalidParams, NotFound
from pps_core.testing import LayerContract

PLUGINS = ["chroma", "embeddings"]


def _sources(out):
    return [r["source"] for r in out["results"]]


async def _save(memory, title, content, **extra):
    return (await memory.call("anchor_save", {"title": title, "content": content, **extra}))["saved"]


class TestChromaContract(LayerContract):
    plugins = PLUGINS
    layer_name = "core_anchors"

    async def add_items(self, memory, texts):
        for i, text in enumerate(texts):
            await _save(memory, f"item {i}", text)


async def test_save_search_list_delete(make_memory, pps_home):
    memory = await make_memory(plugins=PLUGINS)
    snow = await _save(memory, "First snow", "We watched the first snow fall over the harbour.",
                       tags=["winter", "sea"], location="balcony")
    await _save(memory, "Taxes", "Quarterly tax forms, dull but done.")
    await _save(memory, "Pixel", "We adopted a grey kitten and named her Pixel.")
    assert snow == "first-snow.md"
    text = (pps_home / "testentity" / "word_photos" / snow).read_text()
    assert text.startswith("---\ntitle: First snow\ndate: ") and "location: balcony" in text

    out = await memory.call("anchor_search", {"query": "winter weather by the sea", "limit": 2})
    assert _sources(out)[0] == snow
    top = out["results"][0]
    assert top["layer"] == "core_anchors" and top["content"] == "We watched the first snow fall over the harbour."
    assert top["metadata"]["kind"] == "document" and top["metadata"]["title"] == "First snow"
    assert top["metadata"]["tags"] == ["winter", "sea"] and top["timestamp"].endswith("Z")
    assert out["results"][0]["score"] > out["results"][1]["score"]

    page2 = await memory.call("anchor_search", {"query": "winter weather by the sea", "limit": 2, "offset": 1})
    assert _sources(page2)[0] == _sources(out)[1]

    listed = await memory.call("anchor_list", {})
    assert [p["filename"] for p in listed["word_photos"]] == ["pixel.md", "taxes.md", snow]
    assert listed["total"] == 3 and listed["unreadable"] == []

    gone = await memory.call("anchor_delete", {"filename": "first-snow"})
    assert gone["kept_at"] == "word_photos/.deleted/first-snow.md"
    assert (pps_home / "testentity" / "word_photos" / ".deleted" / snow).exists()
    out = await memory.call("anchor_search", {"query": "snow over the harbour", "limit": 5})
    assert snow not in _sources(out)
    with pytest.raises(NotFound) as info:
        await memory.call("anchor_delete", {"filename": "first-snow.md"})
    assert info.value.param == "filename"


@pytest.mark.parametrize("title", ["../../etc/passwd", "notes/evil", "a\\b", ".hidden", "   ", ""])
async def test_path_like_and_empty_titles_are_refused(make_memory, pps_home, title):
    memory = await make_memory(plugins=PLUGINS)
    with pytest.raises(InvalidParams) as info:
        await memory.call("anchor_save", {"title": title, "content": "something"})
    assert info.value.param == "title"
    assert list((pps_home / "testentity" / "word_photos").iterdir()) == []


async def test_bad_params_name_the_parameter(make_memory):
    memory = await make_memory(plugins=PLUGINS)
    for op, params, param in [("anchor_save", {"title": "x", "content": "  "}, "content"),
                              ("anchor_delete", {"filename": "../pps.toml"}, "filename"),
                              ("anchor_search", {"query": "x", "limit": 0}, "limit"),
                              ("anchor_search", {"query": "x", "offset": -1}, "offset")]:
        with pytest.raises(InvalidParams) as info:
            await memory.call(op, params)
        assert info.value.param == param


async def test_unicode_titles_and_same_title_twice(make_memory, pps_home):
    memory = await make_memory(plugins=PLUGINS)
    a = await _save(memory, "Café à l'aube ☕ 初雪", "Coffee at dawn while the first snow of the year fell.")
    b = await _save(memory, "Café à l'aube ☕ 初雪", "A second morning, same café, rain this time.")
    assert a == "café-à-l-aube-初雪.md" and b == "café-à-l-aube-初雪-2.md"
    assert (pps_home / "testentity" / "word_photos" / a).exists()
    out = await memory.call("anchor_search", {"query": "coffee and snow at dawn", "limit": 1})
    assert _sources(out) == [a] and out["results"][0]["metadata"]["title"] == "Café à l'aube ☕ 初雪"
    listed = await memory.call("anchor_list", {})
    assert {p["filename"] for p in listed["word_photos"]} == {a, b}


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "stat"])
async def test_hand_edits_are_found_without_resync(make_memory, pps_home, watch):
    memory = await make_memory(plugins=PLUGINS, chroma={"watch": watch})
    assert (memory.layer("core_anchors")._watch is not None) == (watch and sys.platform == "linux")
    folder = pps_home / "testentity" / "word_photos"
    name = await _save(memory, "Garden", "Planting tomatoes in the spring garden.")
    # edited in place by a person (same inode, folder mtime unchanged)
    (folder / name).write_text("---\ntitle: Garden\n---\n\nThe lighthouse keeper painted his door cobalt blue.\n")
    out = await memory.call("anchor_search", {"query": "lighthouse keeper blue door", "limit": 1})
    assert _sources(out) == [name] and "cobalt" in out["results"][0]["content"]
    # a file dropped in by hand, no front matter: title from its heading, date from its mtime
    (folder / "violin.md").write_text("# Violin lesson\n\nShe practised scales on the violin until midnight.\n")
    out = await memory.call("anchor_search", {"query": "music practice on a string instrument", "limit": 1})
    assert _sources(out) == ["violin.md"] and out["results"][0]["metadata"]["title"] == "Violin lesson"
    # replaced atomically, as many editors save: a new inode under the same name
    (folder / ".violin.md.swp").write_text("# Violin lesson\n\nShe tuned the cello instead.\n")
    os.replace(folder / ".violin.md.swp", folder / "violin.md")
    out = await memory.call("anchor_search", {"query": "tuning a cello", "limit": 1})
    assert "cello" in out["results"][0]["content"]
    # deleted by hand: gone from results and from the list
    (folder / name).unlink()
    out = await memory.call("anchor_search", {"query": "lighthouse keeper blue door", "limit": 5})
    assert name not in _sources(out)
    assert [p["filename"] for p in (await memory.call("anchor_list", {}))["word_photos"]] == ["violin.md"]


async def test_resync_finds_an_edit_that_kept_mtime_and_size_by_its_hash(make_memory, pps_home):
    memory = await make_memory(plugins=PLUGINS)
    folder = pps_home / "testentity" / "word_photos"
    name = await _save(memory, "Walk", "A long walk along the river at dusk.")
    path = folder / name
    st = path.stat()
    text = path.read_text()
    path.write_text(text.replace("river at dusk", "beach at noon"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    changes = await memory.call("anchor_resync", {})
    assert changes["updated"] == [name] and changes["added"] == [] and changes["removed"] == []
    assert changes["total"] == 1
    again = await memory.call("anchor_resync", {})
    assert again["updated"] == [] and again["added"] == []
    out = await memory.call("anchor_search", {"query": "beach at noon", "limit": 1})
    assert "beach at noon" in out["results"][0]["content"]


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "stat"])
async def test_corrupt_empty_and_undecodable_files_are_reported_not_fatal(make_memory, pps_home, watch):
    folder = pps_home / "testentity" / "word_photos"
    folder.mkdir(parents=True)
    (folder / "empty.md").write_text("")
    (folder / "binary.md").write_bytes(b"\xff\xfe\x00\x01garbage\x9c")
    (folder / "badyaml.md").write_text("---\ntitle: [unclosed\n---\n\nThe orchard was full of ripe apples.\n")
    (folder / "good.md").write_text("---\ntitle: Good\n---\n\nA quiet evening reading by the fire.\n")
    memory = await make_memory(plugins=PLUGINS, chroma={"watch": watch})
    health = (await memory.call("pps_health", {}))["layers"]["core_anchors"]
    assert health["available"] and health["counts"]["unreadable"] == 2 and health["counts"]["word_photos"] == 2
    assert "empty.md (empty)" in health["detail"] and "binary.md (not UTF-8" in health["detail"]
    out = await memory.call("anchor_search", {"query": "apples in the orchard", "limit": 1})
    assert _sources(out) == ["badyaml.md"]  # a broken front matter is a warning; the text is still indexed
    listed = await memory.call("anchor_list", {})
    assert {u["filename"] for u in listed["unreadable"]} == {"empty.md", "binary.md"}
    assert "not valid YAML" in next(p for p in listed["word_photos"] if p["filename"] == "badyaml.md")["warning"]
    # fixed by hand: indexed on the next search
    (folder / "empty.md").write_text("Snowshoes on the mountain ridge.\n")
    out = await memory.call("anchor_search", {"query": "snowshoes mountain", "limit": 1})
    assert _sources(out) == ["empty.md"]
    health = (await memory.call("pps_health", {}))["layers"]["core_anchors"]
    assert health["counts"]["unreadable"] == 1


async def test_recent_is_newest_by_date_else_mtime_oldest_first(make_memory, pps_home):
    folder = pps_home / "testentity" / "word_photos"
    folder.mkdir(parents=True)
    (folder / "old.md").write_text("---\ntitle: Old\ndate: 2020-01-01T10:00:00Z\n---\n\nold one\n")
    (folder / "new.md").write_text("---\ntitle: New\ndate: 2030-05-01\n---\n\nnewest by date\n")
    (folder / "undated.md").write_text("no date, so its mtime counts\n")
    os.utime(folder / "undated.md", (1_700_000_000, 1_700_000_000))  # 2023-11-14
    memory = await make_memory(plugins=PLUGINS)
    recent = await memory.layer("core_anchors").recent(2)
    assert [r.source for r in recent] == ["undated.md", "new.md"]
    assert recent[1].timestamp == "2030-05-01T00:00:00.000Z"


async def test_reopening_keeps_the_index_and_notices_edits_made_while_closed(make_memory, pps_home):
    home = pps_home / "re"
    first = await make_memory("re", home=home, plugins=PLUGINS)
    await _save(first, "Boat", "Sailing a small boat across the bay.")
    await _save(first, "Bread", "Baking sourdough bread on a Sunday.")
    await first.close()
    (home / "word_photos" / "bread.md").unlink()
    (home / "word_photos" / "kite.md").write_text("Flying a red kite on the windy hill.\n")
    second = await make_memory("re", home=home, plugins=PLUGINS)
    layer = second.layer("core_anchors")
    out = await second.call("anchor_search", {"query": "kite wind", "limit": 3})  # starts the index: it syncs
    assert sorted(layer._entries) == ["boat.md", "kite.md"]
    assert _sources(out)[0] == "kite.md" and "bread.md" not in _sources(out)
    assert (await second.call("anchor_resync", {}))["updated"] == []


async def test_two_entities_never_see_each_others_word_photos(make_memory):
    a = await make_memory("alice", plugins=PLUGINS)
    b = await make_memory("bob", plugins=PLUGINS)
    await _save(a, "Alice secret", "Alice hid the spare key under the blue flowerpot.")
    await _save(b, "Bob note", "Bob repaired the bicycle chain in the garage.")
    for query in ["spare key flowerpot", "bicycle chain garage"]:
        assert _sources(await a.call("anchor_search", {"query": query, "limit": 10})) == ["alice-secret.md"]
        assert _sources(await b.call("anchor_search", {"query": query, "limit": 10})) == ["bob-note.md"]
    assert [p["filename"] for p in (await b.call("anchor_list", {}))["word_photos"]] == ["bob-note.md"]


async def test_without_an_embedder_the_layer_is_unavailable_not_fatal(make_memory):
    memory = await make_memory(plugins=["chroma"])
    health = (await memory.call("pps_health", {}))["layers"]["core_anchors"]
    assert not health["available"] and "embeddings" in health["detail"]


async def test_with_a_scan_interval_the_folder_still_reveals_new_and_deleted_files(make_memory, pps_home):
    memory = await make_memory(plugins=PLUGINS, chroma={"scan_interval_s": 3600, "watch": False})
    folder = pps_home / "testentity" / "word_photos"
    name = await _save(memory, "Garden", "Planting tomatoes in the spring garden.")
    (folder / "kite.md").write_text("Flying a red kite on the windy hill.\n")
    assert _sources(await memory.call("anchor_search", {"query": "kite on a hill", "limit": 1})) == ["kite.md"]
    (folder / name).write_text("Painting the fence white.\n")  # in place: waits for the interval or a resync
    assert (await memory.call("anchor_resync", {}))["updated"] == [name]
    (folder / "kite.md").unlink()
    assert "kite.md" not in _sources(await memory.call("anchor_search", {"query": "kite on a hill", "limit": 5}))


@pytest.mark.parametrize("damage", ["garbage", "stale"])
async def test_a_damaged_or_stale_state_file_falls_back_to_the_index(make_memory, pps_home, damage):
    import json

    home = pps_home / "st"
    first = await make_memory("st", home=home, plugins=PLUGINS)
    await _save(first, "Boat", "Sailing a small boat across the bay.")
    await _save(first, "Bread", "Baking sourdough bread on a Sunday.")
    await first.close()
    state = home / "chroma" / "pps_word_photos.json"
    data = json.loads(state.read_text())
    assert set(data["files"]) == {"boat.md", "bread.md"}
    if damage == "garbage":
        state.write_text("{not json")
    else:  # as if the process died between the index write and the state write
        del data["files"]["bread.md"]
        state.write_text(json.dumps(data))
    second = await make_memory("st", home=home, plugins=PLUGINS)
    layer = second.layer("core_anchors")
    await asyncio.to_thread(layer.newest, 1)  # the index process starts at the first read
    assert sorted(layer._entries) == ["boat.md", "bread.md"]
    assert (await second.call("anchor_resync", {}))["updated"] == []
    out = await second.call("anchor_search", {"query": "sourdough", "limit": 1})
    assert _sources(out) == ["bread.md"]


async def test_a_long_word_photo_is_found_by_words_near_its_end(make_memory, pps_home):
    memory = await make_memory(plugins=PLUGINS)
    filler = "\n\n".join(f"Paragraph {i} about ordinary errands, groceries and laundry on a weekday." for i in range(60))
    whale = ("On the way home a humpback whale breached right beside the ferry. The whale rose out of the grey sea "
             "twice, and everyone on deck gasped as the whale splashed down. We watched the whale's tail until "
             "it dived under the ferry's wake.")
    await _save(memory, "Long day", filler + "\n\n" + whale)
    await _save(memory, "Errands", "Groceries and laundry again.")
    out = await memory.call("anchor_search", {"query": "whale jumping out of the sea", "limit": 1})
    assert _sources(out) == ["long-day.md"]
    assert (await memory.call("pps_health", {}))["layers"]["core_anchors"]["counts"]["chunks"] > 3


async def test_concurrent_saves_and_searches(make_memory):
    import asyncio

    memory = await make_memory(plugins=PLUGINS)
    saves = [memory.call("anchor_save", {"title": f"Note {i}", "content": f"Note number {i} about the sea."})
             for i in range(12)]
    searches = [memory.call("anchor_search", {"query": "the sea", "limit": 3}) for _ in range(12)]
    results = await asyncio.gather(*saves, *searches)
    assert len({r["saved"] for r in results[:12]}) == 12
    listed = await memory.call("anchor_list", {})
    assert listed["total"] == 12
    out = await memory.call("anchor_search", {"query": "note about the sea", "limit": 20})
    assert len(out["results"]) == 12


async def test_a_replaced_folder_is_read_afresh(make_memory, pps_home):
    memory = await make_memory(plugins=PLUGINS)
    folder = pps_home / "testentity" / "word_photos"
    await _save(memory, "Boat", "Sailing a small boat across the bay.")
    os.rename(folder, folder.with_name("word_photos_old"))  # e.g. restored from a backup
    folder.mkdir()
    (folder / "kite.md").write_text("Flying a red kite on the windy hill.\n")
    out = await memory.call("anchor_search", {"query": "sailing a boat", "limit": 5})
    assert _sources(out) == ["kite.md"]
    (folder / "kite.md").write_text("Flying a green kite by the lake.\n")  # and the new folder is watched
    out = await memory.call("anchor_search", {"query": "kite by the lake", "limit": 1})
    assert "green kite" in out["results"][0]["content"]


async def test_the_index_process_starts_at_the_first_use_of_the_word_photos(make_memory, pps_home):
    """Issue 23: a command that never touches word-photos (a turn stored) starts no index process (Chroma's import
    costs a second process about 0.7 s of CPU); the first read or write of them starts it."""
    home = pps_home / "lazy"
    first = await make_memory("lazy", home=home, plugins=["sqlite", *PLUGINS])
    await _save(first, "Harbour", "The first snow on the harbour wall.")
    await first.close()
    memory = await make_memory("lazy", home=home, plugins=["sqlite", *PLUGINS])
    layer = memory.layer("core_anchors")
    await memory.call("store_message", {"content": "hello", "author_name": "J", "channel": "terminal"})
    assert layer.index._proc is None  # opened, and nothing started
    out = await memory.call("anchor_search", {"query": "snow on the wall", "limit": 1})
    assert _sources(out) == ["harbour.md"] and layer.index._proc is not None
    health = (await memory.call("pps_health"))["layers"]["core_anchors"]
    assert health["available"] and health["counts"]["word_photos"] == 1

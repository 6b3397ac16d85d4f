"""anchor_get and anchor_edit: one word-photo read and rewritten in place; the index follows the file."""

import pytest

from pps_core.errors import InvalidParams, NotFound

PLUGINS = ["chroma", "embeddings"]


async def test_edit_rewrites_the_file_in_place_and_search_follows(make_memory, pps_home):
    memory = await make_memory(plugins=PLUGINS)
    saved = await memory.call("anchor_save", {"title": "First snow", "content": "Snow over the harbour.",
                                              "tags": ["winter"], "location": "balcony"})
    before = await memory.call("anchor_get", {"filename": "first-snow"})
    assert before["content"] == "Snow over the harbour." and before["tags"] == ["winter"]

    out = await memory.call("anchor_edit", {"filename": "first-snow.md", "content": "An owl hooted at midnight."})
    assert out["edited"] == saved["saved"] == "first-snow.md" and out["indexed"]
    path = pps_home / "testentity" / "word_photos" / "first-snow.md"
    text = path.read_text()
    assert "An owl hooted at midnight." in text and "Snow over" not in text
    after = await memory.call("anchor_get", {"filename": "first-snow.md"})
    assert (after["title"], after["date"], after["tags"], after["location"]) == (
        "First snow", before["date"], ["winter"], "balcony")
    found = await memory.call("anchor_search", {"query": "owl at night", "limit": 1})
    assert found["results"][0]["content"] == "An owl hooted at midnight."
    listed = await memory.call("anchor_list", {})
    assert [p["filename"] for p in listed["word_photos"]] == ["first-snow.md"]  # no second file

    await memory.call("anchor_edit", {"filename": "first-snow", "content": "x", "title": "Owls", "tags": []})
    assert (await memory.call("anchor_get", {"filename": "first-snow"}))["title"] == "Owls"


async def test_get_and_edit_refuse_paths_and_unknown_files(make_memory):
    memory = await make_memory(plugins=PLUGINS)
    for op, extra in (("anchor_get", {}), ("anchor_edit", {"content": "x"})):
        with pytest.raises(InvalidParams) as info:
            await memory.call(op, {"filename": "../pps.toml", **extra})
        assert info.value.param == "filename"
        with pytest.raises(NotFound):
            await memory.call(op, {"filename": "nothing-here.md", **extra})
    await memory.call("anchor_save", {"title": "T", "content": "body"})
    with pytest.raises(InvalidParams) as info:
        await memory.call("anchor_edit", {"filename": "t.md", "content": "   "})
    assert info.value.param == "content"

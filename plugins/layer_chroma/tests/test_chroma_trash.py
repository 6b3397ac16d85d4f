"""Every deleted word-photo is kept under .deleted/, even the same name deleted several times in one second."""

PLUGINS = ["chroma", "embeddings"]


async def test_deleting_one_name_three_times_keeps_three_copies(make_memory, pps_home):
    memory = await make_memory(plugins=PLUGINS)
    for n in range(3):
        saved = await memory.call("anchor_save", {"title": "Draft", "content": f"version {n} of the draft"})
        assert saved["saved"] == "draft.md"
        await memory.call("anchor_delete", {"filename": "draft.md"})
    trash = pps_home / "testentity" / "word_photos" / ".deleted"
    kept = sorted(p.read_text().rsplit("version ", 1)[1].split()[0] for p in trash.iterdir())
    assert kept == ["0", "1", "2"]

"""A hand-edited word-photo whose date is at the edge of the calendar is a warning, never a failed search."""

import pytest

PLUGINS = ["chroma", "embeddings"]


@pytest.mark.parametrize("zone, date", [("UTC", "0001-01-01T00:00:00+05:00"),
                                        ("UTC", "9999-12-31T23:00:00-05:00"),
                                        ("America/New_York", "0001-01-01T00:00:00Z"),
                                        ("Asia/Tokyo", "9999-12-31T23:59:00Z")])
async def test_a_date_at_the_calendar_edge_is_a_warning(make_memory, pps_home, zone, date):
    memory = await make_memory(plugins=PLUGINS, timezone=zone)
    folder = pps_home / "testentity" / "word_photos"
    (folder / "old.md").write_text(f"---\ntitle: Old\ndate: {date}\n---\n\nAncient snow on the hills.\n")
    found = await memory.call("anchor_search", {"query": "snow on the hills"})
    assert [r["source"] for r in found["results"]] == ["old.md"]
    listed = await memory.call("anchor_list", {})
    assert [p["filename"] for p in listed["word_photos"]] == ["old.md"]
    assert "warning" in listed["word_photos"][0]
    startup = await memory.call("ambient_recall", {"context": "startup"})
    assert "Ancient snow" in startup["text"]

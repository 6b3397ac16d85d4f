"""Word-photos in ambient recall; a changed embedder rebuilds the index from the files."""

import importlib.util

from pps_core import hookimpl

HAS_SQLITE = importlib.util.find_spec("pps_sqlite") is not None
STARTUP_PLUGINS = (["sqlite"] if HAS_SQLITE else []) + ["crystals", "chroma", "embeddings"]


async def test_startup_shows_the_two_newest_word_photos(make_memory, pps_home):
    memory = await make_memory(plugins=STARTUP_PLUGINS)
    for title, text in [("One", "The first photo, oldest."), ("Two", "The second photo."),
                        ("Three", "The third photo, nearly newest."), ("Four", "The fourth photo, the newest.")]:
        await memory.call("anchor_save", {"title": title, "content": text})
    await memory.call("crystallize", {"content": "A crystal of the week."})
    out = await memory.call("ambient_recall", {"context": "startup"})
    section = next(s for s in out["manifest"]["sections"] if s["layer"] == "core_anchors")
    assert section["name"] == "Word-photos" and section["items"] == 2
    anchors = [r["source"] for r in out["results"] if r["layer"] == "core_anchors"]
    assert anchors == ["three.md", "four.md"]  # chronological
    text = out["text"]
    assert "The third photo" in text and "The fourth photo" in text and "The second photo" not in text
    assert text.index("The third photo") < text.index("The fourth photo")
    assert {s["layer"]: s["status"] for s in out["layers"]}["core_anchors"] == "ok"


async def test_search_recall_includes_word_photos(make_memory):
    memory = await make_memory(plugins=STARTUP_PLUGINS)
    await memory.call("anchor_save", {"title": "Lighthouse", "content": "The keeper painted the door cobalt blue."})
    out = await memory.call("ambient_recall", {"context": "what colour was the lighthouse door?"})
    assert any(r["layer"] == "core_anchors" and r["source"] == "lighthouse.md" for r in out["results"])


class CountingEmbedder:
    """A tiny third-party embedder: letters counted into 26 buckets (enough to tell texts apart)."""

    name = "test:letters"
    dimension = 26

    def embed(self, texts):
        out = []
        for t in texts:
            v = [float(t.lower().count(chr(97 + i))) + 0.01 for i in range(26)]
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v])
        return out


class LettersPlugin:
    @hookimpl
    def pps_embedder(self, memory):
        return CountingEmbedder()


async def test_another_embedder_rebuilds_the_index_from_the_files(make_memory, pps_home):
    home = pps_home / "swap"
    first = await make_memory("swap", home=home, plugins=["chroma", "embeddings"])
    await first.call("anchor_save", {"title": "Zebra", "content": "zzz zebra zig zag"})
    await first.call("anchor_save", {"title": "Apple", "content": "an apple a day"})
    await first.close()
    second = await make_memory("swap", home=home, plugins=["chroma"], extra_plugins=[LettersPlugin()])
    layer = second.layer("core_anchors")
    out = await second.call("anchor_search", {"query": "zzzz", "limit": 1})
    assert layer.index.rebuilt  # emptied when the index started, filled again from the files on this first read
    assert out["results"][0]["source"] == "zebra.md" and layer.index.count() == 2
async def test_unrelated_question_shows_no_word_photo(make_memory):
    """A real match is shown; the nearest neighbour of an unrelated question is not."""
    m = await make_memory(plugins=STARTUP_PLUGINS)
    await m.call("anchor_save", {"title": "First morning coffee",
                                 "content": "Jeff with his coffee at dawn, planning the day with me."})
    related = await m.call("ambient_recall", {"context": "coffee in the early morning"})
    assert [r["source"] for r in related["results"] if r["layer"] == "core_anchors"] == ["first-morning-coffee.md"]
    unrelated = await m.call("ambient_recall", {"context": "what wood should the garden beds use?"})
    assert not [r for r in unrelated["results"] if r["layer"] == "core_anchors"]
    assert (await m.call("anchor_search", {"query": "what wood should the garden beds use?"}))["results"]

"""A glance (``Memory(glance=True)``): the layers that declare ``Layer.glance`` open read-only beside the process
that owns the entity, the others are warming up and named as such, writes are refused, nothing starts."""

import sqlite3

import pytest

from pps_core import Memory, SectionConfig, Unavailable, hookimpl
from pps_core.settings import load_settings
from pps_core.testing import ScriptedLayer, layer_plugin


class Opened:
    __pps_name__ = "opened"

    def __init__(self) -> None:
        self.events: list[str] = []

    @hookimpl
    def pps_memory_opened(self, memory):
        self.events.append("opened")

    @hookimpl
    def pps_memory_closing(self, memory):
        self.events.append("closing")


class Heavy(ScriptedLayer):
    """A layer that must not open at a glance (its store is the owner's alone)."""

    async def open(self) -> None:
        raise AssertionError("a glance opened a layer that does not declare glance")


async def test_a_glance_reads_beside_the_owner_and_names_what_is_warming(make_memory, pps_home):
    heavy = Heavy("rich_texture", ["the graph"], title="Graph",
                  sections=[SectionConfig(name="Graph", layer="rich_texture", count=1, position=50)])
    owner = await make_memory("lyra", plugins=["sqlite", "crystals"])  # holds the owner lock, as a server does
    await owner.call("store_message", {"content": "The stainless fasteners on the boat corroded.",
                                       "author_name": "Jeff", "channel": "terminal:a"})
    await owner.call("crystallize", {"content": "Jeff is restoring a boat."})
    seen = Opened()
    settings = load_settings("lyra", pps_home / "lyra", plugins=["sqlite", "crystals"], timezone="UTC")
    async with Memory(settings, extra_plugins=[layer_plugin(heavy, name="heavy"), seen], glance=True) as glance:
        assert seen.events == []  # nothing starts in the background
        assert [w.name for w in glance.warming()] == ["rich_texture"]
        startup = await glance.call("ambient_recall", {"context": "startup"})
        assert "fasteners on the boat corroded" in startup["text"] and "restoring a boat" in startup["text"]
        assert "Partial: Graph still warming up" in startup["text"]
        assert {s["layer"]: s["status"] for s in startup["layers"]}["rich_texture"] == "warming"
        found = await glance.call("ambient_recall", {"context": "did the boat fasteners corrode?"})
        assert "fasteners on the boat corroded" in found["text"] and "Unavailable" not in found["text"]
        assert glance.embedder is None  # no model at a glance: turns by their words
        with pytest.raises(Unavailable, match="only glances"):
            await glance.call("store_message", {"content": "x", "author_name": "Jeff", "channel": "terminal:a"})
        await owner.call("store_message", {"content": "A second turn about the anchor chain.",  # the owner writes on
                                           "author_name": "Jeff", "channel": "terminal:a"})
        again = await glance.call("ambient_recall", {"context": "anchor chain"})
        assert "anchor chain" in again["text"]
    assert seen.events == []
    assert owner.lock.held  # the glance took no lock and left the owner's alone
    await owner.call("store_message", {"content": "still writable", "author_name": "Jeff", "channel": "terminal:a"})


async def test_a_glance_at_an_entity_without_a_database_yet_says_the_turns_are_warming(pps_home):
    settings = load_settings("fresh", pps_home / "fresh", plugins=["sqlite", "crystals"], timezone="UTC")
    async with Memory(settings, glance=True) as glance:
        assert [w.name for w in glance.warming()] == ["raw_capture", "message_summaries"]
        text = (await glance.call("ambient_recall", {"context": "startup"}))["text"]
        assert "Partial: Raw capture, Summaries still warming up" in text or \
               "Partial: Summaries, Raw capture still warming up" in text
    assert not (pps_home / "fresh").exists()  # a glance creates nothing: no database, not even the folder


async def test_the_sqlite_glance_cannot_write(make_memory, pps_home):
    owner = await make_memory("lyra", plugins=["sqlite"])
    await owner.call("store_message", {"content": "hello", "author_name": "Jeff", "channel": "terminal:a"})
    settings = load_settings("lyra", pps_home / "lyra", plugins=["sqlite"], timezone="UTC")
    async with Memory(settings, glance=True) as glance:
        db = glance.require_layer("raw_capture").backend.db  # the adapter's connection: test-only access
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await db.run(lambda c: c.execute("DELETE FROM messages"), db.conn)

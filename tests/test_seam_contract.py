"""The kernel's seam keeps what the hookspecs and the Layer docs say (issue 38): layers in plugin order, a default
startup section that knows its total, one latency sample per search."""

from __future__ import annotations

from pps_core import SectionConfig
from pps_core.testing import ScriptedLayer, layer_plugin


async def test_layers_come_in_plugin_order(make_memory):
    """``pps_layers``: "All results, in plugin order" (they came back in reverse)."""
    first, second = layer_plugin(ScriptedLayer("first"), name="one"), layer_plugin(ScriptedLayer("second"), name="two")
    memory = await make_memory(plugins=[], extra_plugins=[first, second])
    assert memory.layer_names() == ["first", "second"]
    assert list(memory.layers) == ["first", "second"]
    configured = await make_memory("c", plugins=["sqlite", "crystals"])
    assert configured.layer_names() == ["raw_capture", "message_summaries", "crystallization"]
    assert list(configured.layers) == configured.layer_names()


async def test_a_default_startup_section_reports_its_total(make_memory):
    """A third-party layer that keeps ``Layer.startup``'s default: its section shows 2 of 7, and says so."""
    notes = ScriptedLayer("notes", [f"note {i}" for i in range(7)], title="Notes",
                          sections=[SectionConfig(name="Notes", layer="notes", count=2, position=5)])
    memory = await make_memory(plugins=[], extra_plugins=[layer_plugin(notes)])
    out = await memory.call("ambient_recall", {"context": "startup"})
    (section,) = [s for s in out["manifest"]["sections"] if s["name"] == "Notes"]
    assert (section["items"], section["total"]) == (2, 7)
    assert "note 6" in out["text"] and "note 4" not in out["text"]  # the newest two


async def test_a_search_records_its_latency_once(make_memory):
    """``memory.search_layer`` is the one search path and records the latency; the layers recorded it too."""
    memory = await make_memory(plugins=["sqlite", "crystals"])
    await memory.call("crystallize", {"content": "Crystal 1: the lamp turns."})
    await memory.call("store_message", {"content": "the lamp turns", "author_name": "A", "channel": "terminal"})
    for name in ("raw_capture", "message_summaries", "crystallization"):
        layer = memory.layers[name]
        before = len(layer._latencies)
        await memory.search_layer(name, "lamp", 5)
        assert len(layer._latencies) - before == 1, name


async def test_a_third_party_hears_summaries_stored_and_turns_forgotten(make_memory):
    """``pps_summary_stored`` and ``pps_messages_forgotten`` have no implementer in PPS itself: they are for third
    parties, and the product's own operations deliver them (a turn store fires both)."""
    from pps_core import hookimpl

    heard: list[tuple[str, object]] = []

    class Listener:
        __pps_name__ = "listener"

        @hookimpl
        def pps_turn_copies(self, memory):
            return []

        @hookimpl
        def pps_summary_stored(self, summary):
            heard.append(("summary", summary.summary_text))

        @hookimpl
        def pps_messages_forgotten(self, ids):
            heard.append(("forgotten", list(ids)))

    memory = await make_memory(plugins=["sqlite"], extra_plugins=[Listener()])
    for text in ("one", "two"):
        await memory.call("store_message", {"content": text, "author_name": "A", "channel": "terminal"})
    await memory.call("store_summary", {"summary_text": "we counted", "message_ids": [1, 2]})
    await memory.call("forget_turns", {"ids": [2]})
    assert heard == [("summary", "we counted"), ("forgotten", [2])]

"""ambient_recall("startup"): the exact package of reference/000, composed from config."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pps_core import LayerHealth, SectionConfig
from pps_core.builtin import recall
from pps_core.testing import ScriptedLayer, layer_plugin

GOLDEN = Path(__file__).parent / "golden"


def at(monkeypatch, iso):
    monkeypatch.setattr(recall, "now_utc", lambda: datetime.fromisoformat(iso).astimezone(UTC))


async def fill(memory, turns=3):
    for i in range(1, 6):
        await memory.call("crystallize", {"content": f"Crystal {i}: session focus number {i}."})
    msgs = [{"content": f"turn {i} " + ("long " * 300 if i == 2 else "hello"), "author_name": "Lyra" if i % 2 else "Jeff",
             "channel": "terminal" if i % 3 else "discord:home", "created_at": f"2026-01-26T14:{20 + i:02d}:00-06:00"}
            for i in range(1, 4 + turns)]
    await memory.call("store_messages", {"messages": msgs})
    await memory.call("store_summary", {"summary_text": "Older work on the graph. " * 40, "message_ids": [1, 2]})
    await memory.call("store_summary", {"summary_text": "Architecture talk about continuity.", "message_ids": [3]})


@pytest.fixture
def anchors():
    return ScriptedLayer("core_anchors", ["first photo", "the kitchen at dawn", "entity continuity moment"],
                         title="Word-photos",
                         sections=[SectionConfig(name="Word-photos", layer="core_anchors", count=2, position=20)])


async def test_startup_matches_golden(make_memory, monkeypatch, anchors):
    memory = await make_memory(plugins=["sqlite", "crystals"], extra_plugins=[layer_plugin(anchors)],
                               timezone="America/Chicago")
    await fill(memory)
    at(monkeypatch, "2026-01-26T20:47:00+00:00")
    out = await memory.call("ambient_recall", {"context": "startup"})
    expected = (GOLDEN / "startup_basic.md").read_text()
    assert out["text"] == expected.rstrip("\n")
    assert out["startup"] is True and out["latency_ms"] >= 0


async def test_manifest_counts_chars_after_truncation(make_memory, monkeypatch, anchors):
    memory = await make_memory(plugins=["sqlite", "crystals"], extra_plugins=[layer_plugin(anchors)])
    await fill(memory)
    out = await memory.call("ambient_recall", {"context": "startup"})
    sections = {s["name"]: s for s in out["manifest"]["sections"]}
    assert sections["Summaries"]["items"] == 2
    summaries = next(part for part in out["text"].split("\n\n---\n") if part.startswith("[summaries]"))
    assert sections["Summaries"]["chars"] == len(summaries)  # what it emitted: header, day lines, the cut text
    assert ("Older work on the graph. " * 40)[:500] + "..." in summaries  # cut to max_chars=500
    assert sections["Recent turns"]["items"] == 3
    assert sections["Crystals"]["items"] == 3 and sections["Word-photos"]["items"] == 2
    assert out["manifest"]["total_chars"] == len(out["text"])
    assert f"TOTAL: {len(out['text'])} chars" in out["text"]


LINES = {"asleep": "Rest now, Nexus.", "late": "Getting late..."}


@pytest.mark.parametrize("hour,line", [(2, "*Rest now, Nexus.*"), (23, "*Getting late...*"), (0, "*Getting late...*"),
                                       (14, None), (5, None)])
async def test_clock_late_night_lines(make_memory, monkeypatch, hour, line):
    memory = await make_memory(plugins=[], startup={"late_night": LINES})
    at(monkeypatch, f"2026-01-26T{hour:02d}:30:00+00:00")
    text = (await memory.call("ambient_recall", {"context": "startup"}))["text"]
    first = text.split("\n\n")[0]
    assert first.startswith("**Clock**: Monday, January 26, 2026 at")
    if line:
        assert first.endswith(line)
    else:
        assert "\n" not in first


async def test_late_night_lines_come_from_config(make_memory, monkeypatch):
    memory = await make_memory(plugins=[], startup={"late_night": {"asleep": "Rest now, Nexus."}})
    at(monkeypatch, "2026-01-26T03:00:00+00:00")
    text = (await memory.call("ambient_recall", {"context": "startup"}))["text"]
    assert "*Rest now, Nexus.*" in text and "love" not in text


async def test_the_kernel_gives_no_backlog_key_a_meaning_of_its_own(make_memory):
    """'unsummarized' is a word like any other to the kernel: no thresholds, no 'messages' (the turn domain words
    its own backlog, plugins/turns/tests/test_turns_backlog.py); a zero without a note is left out."""
    class Backlog(ScriptedLayer):
        async def health(self):
            return LayerHealth(layer=self.name, available=True,
                               backlog={"unsummarized": 87, "summaries_to_rewrite": 1, "idle": 0})

    memory = await make_memory(plugins=[], extra_plugins=[layer_plugin(Backlog("turns"))])
    text = (await memory.call("ambient_recall", {"context": "startup"}))["text"]
    assert "**Memory Health**: 87 unsummarized | 1 summaries to rewrite\n" in text


async def test_a_layer_words_its_backlog_in_the_health_line(make_memory):
    class Worded(ScriptedLayer):
        async def health(self):
            return LayerHealth(layer=self.name, available=True, backlog={"drafts": 3, "quiet": 5})

        def backlog_text(self, key, count):
            return f"{count} drafts waiting (publish them)" if key == "drafts" else None

    memory = await make_memory(plugins=[], extra_plugins=[layer_plugin(Worded("notes"))])
    text = (await memory.call("ambient_recall", {"context": "startup"}))["text"]
    assert "**Memory Health**: 3 drafts waiting (publish them)\n" in text


async def test_the_kernel_has_no_late_night_words_of_its_own(make_memory, monkeypatch):
    """The words are the entity's (config); the kernel keeps only the hours."""
    at(monkeypatch, "2026-01-26T02:30:00+00:00")
    plain = (await (await make_memory(plugins=[])).call("ambient_recall", {"context": "startup"}))["text"]
    assert "\n" not in plain.split("\n\n")[0]  # the clock line alone
    seed = await make_memory("seed", plugins=[], startup={"late_night": {"asleep": "You should be asleep, love."}})
    assert "*You should be asleep, love.*" in (await seed.call("ambient_recall", {"context": "startup"}))["text"]


async def test_a_backlog_shows_the_layers_own_note_and_none_by_default(make_memory):
    class Queue(ScriptedLayer):
        backlog_target = "the index"

        async def health(self):
            return LayerHealth(layer=self.name, available=True, backlog={"unsummarized": 87, "uningested": 30})

    class Advised(Queue):
        def backlog_note(self, key, count):
            return f"(reindex: {count} waiting)" if key == "uningested" else None

    plain = await make_memory("plain", plugins=[], extra_plugins=[layer_plugin(Queue("turns"))])
    text = (await plain.call("ambient_recall", {"context": "startup"}))["text"]
    assert "**Memory Health**: 87 unsummarized to the index | 30 uningested to the index\n" in text
    advised = await make_memory("advised", plugins=[], extra_plugins=[layer_plugin(Advised("turns"))])
    text = (await advised.call("ambient_recall", {"context": "startup"}))["text"]
    assert "30 uningested to the index (reindex: 30 waiting)" in text


async def test_sections_of_unloaded_layers_are_skipped(make_memory):
    sections = [{"name": "Ghost", "layer": "not_loaded"}, {"name": "Docs", "layer": "docs"}]
    memory = await make_memory(plugins=[], startup={"sections": sections},
                               extra_plugins=[layer_plugin(ScriptedLayer("docs", ["a doc"]))])
    out = await memory.call("ambient_recall", {"context": "startup"})
    assert [s["name"] for s in out["manifest"]["sections"]] == ["Docs"]


async def test_a_failing_layer_never_fails_startup(make_memory):
    slow = ScriptedLayer("crystallization", ["never shown"],
                         sections=[SectionConfig(name="Crystals", layer="crystallization", count=3)])
    docs = ScriptedLayer("docs", ["still here"], sections=[SectionConfig(name="Docs", layer="docs")])
    memory = await make_memory(plugins=[], extra_plugins=[layer_plugin(slow, docs)],
                               recall={"layer_timeout_s": 0.2})
    await memory.call("ambient_recall", {"context": "startup"})  # answered once: warm, so stuck below
    slow.delay = 5
    out = await memory.call("ambient_recall", {"context": "startup"})
    assert "still here" in out["text"]
    assert "Unavailable: crystallization: timeout" in out["text"]
    assert {s["layer"]: s["status"] for s in out["layers"]}["crystallization"] == "timeout"
    assert out["latency_ms"] < 4000


def _section(name, layer, position, **kw):
    return SectionConfig(name=name, layer=layer, position=position, **kw)


async def test_each_layer_contributes_its_default_section_in_position_order(make_memory):
    late = ScriptedLayer("late", ["zeta"], sections=[_section("Late", "late", 90)])
    early = ScriptedLayer("early", ["alpha"], sections=[_section("Early", "early", 5)])
    memory = await make_memory(plugins=[], extra_plugins=[layer_plugin(late, early)])
    out = await memory.call("ambient_recall", {"context": "startup"})
    assert [s["name"] for s in out["manifest"]["sections"]] == ["Early", "Late"]
    assert out["text"].index("alpha") < out["text"].index("zeta")


async def test_startup_add_keeps_the_defaults_and_omit_drops_by_name(make_memory):
    notes = ScriptedLayer("notes", ["n1", "n2"], sections=[_section("Notes", "notes", 10)])
    extra = ScriptedLayer("extra", ["x1"])  # contributes no section of its own
    memory = await make_memory(plugins=[], extra_plugins=[layer_plugin(notes, extra)],
                               startup={"add": [{"name": "Extra", "layer": "extra"}]})
    out = await memory.call("ambient_recall", {"context": "startup"})
    assert [s["name"] for s in out["manifest"]["sections"]] == ["Notes", "Extra"]
    memory2 = await make_memory(entity="two", plugins=[], extra_plugins=[layer_plugin(notes, extra, name="s2")],
                                startup={"omit": ["Notes"], "add": [{"name": "Extra", "layer": "extra"}]})
    out = await memory2.call("ambient_recall", {"context": "startup"})
    assert [s["name"] for s in out["manifest"]["sections"]] == ["Extra"]


async def test_a_third_party_layer_names_the_call_for_what_a_budget_left_out(make_memory):
    from pps_core import Pointer

    notes = ScriptedLayer("notes", [f"note {i} " + "words " * 60 for i in range(30)],
                          sections=[_section("Notes", "notes", 10)],
                          pointer=Pointer(operation="notes_list", params={"limit": 30}))
    memory = await make_memory(plugins=[], extra_plugins=[layer_plugin(notes)])
    out = await memory.call("ambient_recall", {"context": "startup", "budget": 2000})
    (left,) = out["manifest"]["left_out"]
    assert left["operation"] == "notes_list" and left["params"] == {"limit": 30} and left["left_out"] > 0
    assert 'call notes_list {"limit": 30}' in out["text"]

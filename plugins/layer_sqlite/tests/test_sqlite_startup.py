"""The sqlite layers' startup sections over real turns: every unsummarized turn in time order, turns cut at
1,000 characters, a configured composition and raw_capture's paging pointer (moved from
tests/test_recall_startup.py; the kernel's composition is tested there on fake layers)."""

import json
from datetime import UTC, datetime

from pps_core import SearchResult, StartupItems, TurnItem
from pps_core.builtin import recall


async def test_all_250_unsummarized_turns_shown_chronologically(make_memory):
    memory = await make_memory(plugins=["sqlite"])
    await memory.call("store_messages", {"messages": [
        {"content": f"message number {i:03d}", "author_name": "Jeff", "channel": "terminal",
         "created_at": f"2026-01-{1 + i // 24:02d}T{i % 24:02d}:00:00"} for i in range(250)]})
    out = await memory.call("ambient_recall", {"context": "startup"})
    text = out["text"]
    assert "250 unsummarized messages (HIGH - summarize soon!)" in text
    assert "[unsummarized_turns] (showing 250 of 250)" in text
    positions = [text.index(f"message number {i:03d}") for i in range(250)]
    assert positions == sorted(positions)
    assert "Recent turns: " in text and "(250 items)" in text


async def test_turns_truncated_at_1000_chars(make_memory):
    memory = await make_memory(plugins=["sqlite"])
    await memory.call("store_message", {"content": "x" * 1500, "author_name": "A", "channel": "c"})
    out = await memory.call("ambient_recall", {"context": "startup"})
    text = out["text"]
    assert "x" * 1000 + "..." in text and "x" * 1001 not in text
    (turns,) = [s for s in out["manifest"]["sections"] if s["name"] == "Recent turns"]
    assert turns["items"] == 1 and 1000 < turns["chars"] < 1500  # what it emitted: the cut turn and its line
    assert f"Recent turns: {turns['chars']} chars (1 item)" in text


async def test_composition_comes_from_config(make_memory):
    sections = [{"name": "Crystals", "layer": "crystallization", "count": 1},
                {"name": "Recent turns", "layer": "raw_capture", "style": "turns", "count": 2, "max_chars": 20}]
    memory = await make_memory(plugins=["sqlite", "crystals"], startup={"sections": sections})
    for i in range(3):
        await memory.call("crystallize", {"content": f"crystal {i}"})
    await memory.call("store_messages", {"messages": [
        {"content": f"turn {i}", "author_name": "A", "channel": "c"} for i in range(5)]})
    await memory.call("store_summary", {"summary_text": "a summary that must not show", "message_ids": [1]})
    text = (await memory.call("ambient_recall", {"context": "startup"}))["text"]
    assert "crystal 2" in text and "crystal 1" not in text
    assert "summaries" not in text.lower().split("=== ambient recall manifest ===")[1].split("total")[0]
    assert "a summary that must not show" not in text
    assert ("[unsummarized_turns] (showing 2 of 4 - use get_turns_since_summary with offset=2 for older)"
            in text)
    assert "turn 3" in text and "turn 4" in text and "turn 2" not in text


def _counting_models(monkeypatch) -> list[int]:
    """Count every SearchResult validated or dumped from now on."""
    built = [0]
    init, dump = SearchResult.__init__, SearchResult.model_dump

    def counting_init(self, **data):
        built[0] += 1
        init(self, **data)

    def counting_dump(self, **kwargs):
        built[0] += 1
        return dump(self, **kwargs)

    monkeypatch.setattr(SearchResult, "__init__", counting_init)
    monkeypatch.setattr(SearchResult, "model_dump", counting_dump)
    return built


async def test_startup_validates_no_model_per_turn(make_memory, monkeypatch):
    """Issue 26: every unsummarized turn, at every session start, costs a line and a JSON item, not a validated and
    dumped SearchResult each (raw_capture hands them as pps_core.TurnItem): the models the package builds do not grow
    with the turns it shows."""
    memory = await make_memory(plugins=["sqlite", "crystals"])  # crystals: a section of SearchResults beside
    await memory.call("crystallize", {"content": "a crystal"})
    built = _counting_models(monkeypatch)

    async def models_for(more: int, shown: int) -> int:
        await memory.call("store_messages", {"messages": [
            {"content": f"turn {i}", "author_name": "Jeff", "channel": "terminal"} for i in range(more)]})
        await memory.call("ambient_recall", {"context": "startup"})  # warm
        built[0] = 0
        out = await memory.call("ambient_recall", {"context": "startup"})
        assert f"[unsummarized_turns] (showing {shown} of {shown})" in out["text"]
        assert len(out["results"]) == shown + 1
        return built[0]

    few = await models_for(10, 10)
    many = await models_for(200, 210)
    assert many == few, f"{few} models for 10 turns, {many} for 210"


async def test_turn_items_render_and_answer_as_their_search_results(make_memory, monkeypatch):
    """A section of TurnItems is the package a section of the same turns as SearchResults gives, character for
    character and item for item: every style, channel quotas, a count, newest first, truncation, budgets."""
    from pps_turns.layers import RawCaptureLayer, turn_item, turn_result

    sections = [
        {"name": "Recent turns", "layer": "raw_capture", "style": "turns", "max_chars": 40,
         "quotas": {"discord": 2, "*": 3}},
        {"name": "Newest", "layer": "raw_capture", "style": "turns", "count": 4, "order": "newest_first"},
        {"name": "As documents", "layer": "raw_capture", "style": "documents", "count": 2, "max_chars": 10},
        {"name": "As summaries", "layer": "raw_capture", "style": "summaries", "count": 2},
    ]
    memory = await make_memory(plugins=["sqlite"], startup={"sections": sections}, timezone="America/Chicago")
    await memory.call("store_messages", {"messages": [
        {"content": f"turn {i} " + ("long " * 30 if i % 4 == 0 else "short"), "author_name": "Lyra" if i % 2 else "Jeff",
         "channel": ["terminal:0123456789abcdef", "discord:home", "email", "terminal:0123456789abcxyz"][i % 4],
         "created_at": f"2026-03-{8 + i // 10:02d}T{(i * 5) % 24:02d}:{i % 60:02d}:07Z",
         "metadata": {"n": i, "tags": ["a", "b"]} if i % 3 else {}} for i in range(25)]})
    monkeypatch.setattr(recall, "now_utc", lambda: datetime(2026, 3, 12, 4, 30, tzinfo=UTC))

    async def packages():
        return [await memory.call("ambient_recall", {"context": "startup", **extra})
                for extra in ({}, {"budget": 1500}, {"budget": 400})]

    bulk = await packages()
    original = RawCaptureLayer.startup

    async def as_search_results(self, count):
        found = await original(self, count)
        assert all(isinstance(r, TurnItem) for r in found.items)
        return StartupItems(items=[r.to_result() for r in found.items], total=found.total)

    monkeypatch.setattr(RawCaptureLayer, "startup", as_search_results)
    models = await packages()
    for a, b in zip(bulk, models, strict=True):
        for out in (a, b):
            out.pop("latency_ms")
            for h in out["health"].values():
                h.pop("latency_ms")
            for st in out["layers"]:
                st.pop("latency_ms")
        assert json.dumps(a) == json.dumps(b)
    assert len(bulk[0]["results"]) == 25 + 4 + 2 + 2 and "[2026-03-" in bulk[0]["text"]
    row = {"id": 7, "content": "x", "author_name": "A", "channel": "c", "created_at": "2026-01-01T00:00:00.000Z",
           "session_id": None, "message_id": "m", "summary_id": None, "metadata": {"k": [1, 2.5, None]}}
    assert turn_item(row).to_result() == turn_result(row)
    assert turn_item(row).as_json() == turn_result(row).model_dump(mode="json")

"""The sqlite layers' startup sections over real turns: every unsummarized turn in time order, turns cut at
1,000 characters, a configured composition and raw_capture's paging pointer (moved from
tests/test_recall_startup.py; the kernel's composition is tested there on fake layers)."""



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
    assert f"Recent turns: {turns['chars']} chars (1 items)" in text


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

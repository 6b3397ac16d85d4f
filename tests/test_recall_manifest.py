"""The startup package tells the truth about itself and spends its characters on memory: the manifest's figures
are the characters emitted (per section and in total, counted), and turn lines carry no repeated UUIDs or dates."""

import re

import pytest

from pps_core.testing import ScriptedLayer, layer_plugin

SESSION_A = "dddd1111-2222-4333-8444-555566667777"
SESSION_B = "dddd9999-2222-4333-8444-555566667777"  # shares its first four characters with A


async def seeded(make_memory, n=12):
    anchors = ScriptedLayer("core_anchors", ["the kitchen at dawn", "entity continuity moment"], title="Word-photos")
    m = await make_memory(plugins=["sqlite", "crystals"], extra_plugins=[layer_plugin(anchors)])
    await m.call("crystallize", {"content": "Crystal 1: the lamp turns."})
    await m.call("store_messages", {"messages": [
        {"content": f"turn {i} about the harbor", "author_name": "Jeff" if i % 2 else "Lyra",
         "channel": f"terminal:{SESSION_A if i % 3 else SESSION_B}",
         "created_at": f"2026-01-{25 + i // 6:02d}T14:{i:02d}:00Z"} for i in range(n)]})
    await m.call("store_summary", {"summary_text": "Older work on the harbor. " * 30, "message_ids": [1, 2]})
    return m


def section_text(text: str, header: str) -> str:
    body = text.split("\n\n---\n")
    return next(part for part in body if part.startswith(header))


@pytest.mark.parametrize("budget", [None, 1500])
async def test_total_is_the_characters_emitted(make_memory, budget):
    m = await seeded(make_memory)
    out = await m.call("ambient_recall", {"context": "startup", **({"budget": budget} if budget else {})})
    text = out["text"]
    assert f"TOTAL: {len(text)} chars" in text
    assert out["manifest"]["total_chars"] == len(text)
    if budget:
        assert len(text) <= budget
    sections = {s["name"]: s for s in out["manifest"]["sections"]}
    turns = section_text(text, "[unsummarized_turns]")
    assert sections["Recent turns"]["chars"] == len(turns)
    n = sections["Recent turns"]["items"]
    assert f"Recent turns: {len(turns)} chars ({n} item{'' if n == 1 else 's'})" in text
    summaries = section_text(text, "[summaries]")
    assert sections["Summaries"]["chars"] == len(summaries)


async def test_search_manifest_counts_what_it_shows(make_memory):
    m = await seeded(make_memory)
    out = await m.call("ambient_recall", {"context": "harbor"})
    assert f"TOTAL: {len(out['text'])} chars" in out["text"] and out["manifest"]["total_chars"] == len(out["text"])


async def test_turn_lines_carry_short_channel_labels_and_dates_once(make_memory):
    m = await seeded(make_memory)
    out = await m.call("ambient_recall", {"context": "startup"})
    turns = section_text(out["text"], "[unsummarized_turns]")
    assert SESSION_A not in out["text"] and SESSION_B not in out["text"]
    assert "[terminal:dddd1] Jeff: turn 5 about the harbor" in turns  # shortest prefix that tells A from B
    assert "[terminal:dddd9] Lyra: turn 0 about the harbor" not in turns  # (turn 0 is summarized)
    assert "[terminal:dddd9] Jeff: turn 3 about the harbor" in turns
    days = re.findall(r"^\[(\d{4}-\d{2}-\d{2})\]$", turns, re.M)
    assert days == ["2026-01-25", "2026-01-26"]  # a day line when the day changes, times alone on turn lines
    assert re.search(r"^\[14:03\] \[terminal:dddd9\] Jeff: turn 3", turns, re.M)
    full = {r["metadata"]["channel"] for r in out["results"] if r["metadata"].get("kind") == "turn"}
    assert full == {f"terminal:{SESSION_A}", f"terminal:{SESSION_B}"}  # the structured results keep full ids


async def test_one_session_is_four_characters(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_message", {"content": "hello", "author_name": "J", "channel": f"terminal:{SESSION_A}"})
    text = (await m.call("ambient_recall", {"context": "startup"}))["text"]
    assert "[terminal:dddd] J: hello" in text


async def test_a_budget_cut_keeps_the_day_of_the_first_turn_shown(make_memory):
    m = await seeded(make_memory)
    full = len((await m.call("ambient_recall", {"context": "startup"}))["text"])
    out = await m.call("ambient_recall", {"context": "startup", "budget": full - 150})
    turns = section_text(out["text"], "[unsummarized_turns]")
    shown = re.match(r"\[unsummarized_turns\] \(showing (\d+) of 10", turns)
    assert shown and 0 < int(shown.group(1)) < 10, turns  # the budget cut the oldest
    assert re.fullmatch(r"\[2026-01-2[56]\]", turns.splitlines()[1])  # the first shown turn's day is there

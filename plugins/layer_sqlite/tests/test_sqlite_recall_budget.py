"""Budgeted recall over real turns: raw_capture's quotas and its left-out pointer (get_turns_since_summary)
page back exactly what a budget cut (moved from tests/; the kernel's budget logic is tested on fake layers in
tests/test_recall_budget.py). SQLite only: PostgreSQL serves the same operations, and 1,500-turn fills on
both backends would double the run."""

import json

import pytest

SECTIONS_WITH_QUOTAS = [
    {"name": "Summaries", "layer": "message_summaries", "style": "summaries", "count": 2, "max_chars": 500,
     "order": "newest_first"},
    {"name": "Recent turns", "layer": "raw_capture", "style": "turns", "max_chars": 1000, "count": 30,
     "quotas": {"terminal": 10, "discord": 10, "*": 5}},
]


async def busy(memory, n_terminal=500, n_discord=50, n_email=0):
    msgs = [{"content": f"terminal line {i} " + "words " * 20, "author_name": "Jeff", "channel": "terminal:a"}
            for i in range(n_terminal)]
    msgs += [{"content": f"discord line {i}", "author_name": "Brandi", "channel": "discord:home"}
             for i in range(n_discord)]
    msgs += [{"content": f"email line {i}", "author_name": "Bank", "channel": "email:inbox"} for i in range(n_email)]
    ordered = msgs[n_terminal:] + msgs[:n_terminal]  # discord and email first: the terminal turns are newest
    for i in range(0, len(ordered), 1000):
        await memory.call("store_messages", {"messages": ordered[i:i + 1000]})


@pytest.mark.parametrize("budget", [1_500, 4_000, 9_000])
async def test_budgeted_startup_fits_and_points_at_the_rest(make_memory, budget):
    m = await make_memory(plugins=["sqlite", "crystals"], identity="I am Lyra.")
    for i in range(4):
        await m.call("crystallize", {"content": f"crystal {i} " + "insight " * 60})
    await busy(m, 400, 0)
    out = await m.call("ambient_recall", {"context": "startup", "budget": budget})
    text = out["text"]
    assert len(text) <= budget
    assert text.startswith("I am Lyra.\n\n**Clock**:") and "**Memory Health**: 400 unsummarized" in text
    assert "=== AMBIENT RECALL MANIFEST ===" in text
    left = out["manifest"]["left_out"]
    assert left, "a 400-turn package cannot fit"
    for item in left:  # every pointer is in the text, verbatim
        assert f"call {item['operation']} {json.dumps(item['params'])}" in text
    turns = [x for x in left if x["section"] == "Recent turns"]
    if turns:  # following the pointer returns exactly the turns that were left out
        shown_ids = {r for r in range(400 - turns[0]["shown"] + 1, 401)}
        page = await m.call(turns[0]["operation"], turns[0]["params"])
        got = {t["id"] for t in page["turns"]}
        assert len(got) == turns[0]["left_out"] and not got & shown_ids
        assert got | shown_ids == set(range(1, 401))


async def test_budget_zero_leaves_nothing_out(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await busy(m, 300, 0)
    out = await m.call("ambient_recall", {"context": "startup", "budget": 0})  # everything, asked for
    assert out["manifest"]["left_out"] == [] and "showing 300 of 300" in out["text"]
    unlimited = await make_memory(entity="unlimited", plugins=["sqlite"], startup={"budget": 0})
    await busy(unlimited, 300, 0)
    out = await unlimited.call("ambient_recall", {"context": "startup"})  # or configured: [startup] budget = 0
    assert out["manifest"]["left_out"] == [] and "showing 300 of 300" in out["text"]


async def test_budget_too_small_for_anything_but_the_header(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await busy(m, 50, 0)
    out = await m.call("ambient_recall", {"context": "startup", "budget": 400})
    assert len(out["text"]) <= 400 and out["text"].startswith("**Clock**")


async def test_quotas_hold_with_a_ten_to_one_imbalance(make_memory):
    m = await make_memory(plugins=["sqlite"], startup={"sections": SECTIONS_WITH_QUOTAS})
    await busy(m, n_terminal=500, n_discord=50, n_email=3)
    text = (await m.call("ambient_recall", {"context": "startup"}))["text"]
    lines = [ln for ln in text.splitlines() if ln[:1] == "[" and ln[3:5] == ":" + ln[4] and ln[6:8] == "] "]
    assert len(lines) == 30
    assert sum("[discord:home]" in ln for ln in lines) >= 10
    assert sum("[email:inbox]" in ln for ln in lines) == 3
    assert "showing 30 of 553 - use get_turns_since_summary to page through all" in text
    kinds = ["terminal" if "[terminal:a]" in ln else "other" for ln in lines]
    assert kinds == sorted(kinds)  # chronological: the older discord/email turns come first


async def test_quotas_survive_a_budget_cut(make_memory):
    sections = [dict(SECTIONS_WITH_QUOTAS[1], count=None)]
    m = await make_memory(plugins=["sqlite"], startup={"sections": sections})
    await busy(m, n_terminal=500, n_discord=50)
    out = await m.call("ambient_recall", {"context": "startup", "budget": 3_000})
    text = out["text"]
    assert len(text) <= 3_000
    assert "[discord:home]" in text and "[terminal:a]" in text


async def test_non_startup_budget(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_messages", {"messages": [
        {"content": f"garden note {i} " + "cedar beds " * 50, "author_name": "A", "channel": "c"} for i in range(20)]})
    out = await m.call("ambient_recall", {"context": "garden cedar", "limit_per_layer": 10, "budget": 2_000})
    assert len(out["text"]) <= 2_000 and out["manifest"]["left_out"]


async def test_left_out_pointer_stays_callable_past_one_page_of_turns(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await busy(m, 1_500, 0)
    out = await m.call("ambient_recall", {"context": "startup", "budget": 9_000})
    turns = [x for x in out["manifest"]["left_out"] if x["section"] == "Recent turns"][0]
    assert turns["left_out"] > 1_000
    page = await m.call(turns["operation"], turns["params"])  # the exact call the manifest names
    got = [t["id"] for t in page["turns"]]
    while page["next_offset"] is not None:  # and its pages reach the oldest turn
        page = await m.call("get_turns_since_summary", {"offset": page["next_offset"], "limit": 1_000})
        got += [t["id"] for t in page["turns"]]
    assert sorted(got) == list(range(1, 1_500 - turns["shown"] + 1))

"""list_turns (the explorer's timeline) and turn_activity (its plots): filters, pages, days in the entity's zone,
on every store that browses (pps_turns.BrowsableTurnStore: SQLite and PostgreSQL; the in-memory example does not)."""

import pytest

from pps_core.errors import InvalidParams

pytestmark = pytest.mark.backends("sqlite", "postgres")


def _turn(i, channel, author, at):
    return {"content": f"turn {i}", "author_name": author, "channel": channel, "created_at": at}


async def test_list_turns_pages_filters_and_windows(make_memory):
    m = await make_memory(plugins=["sqlite"])
    turns = [_turn(i, ["terminal:abc", "discord:x", "terminalx"][i % 3], ["Jeff", "Lyra"][i % 2],
                   f"2026-03-0{1 + i // 10}T12:{i % 10:02d}:00Z") for i in range(30)]
    await m.call("store_messages", {"messages": turns})
    page = await m.call("list_turns", {"limit": 7})
    assert page["total"] == 30 and page["next_offset"] == 7
    assert [t["content"] for t in page["turns"]] == [f"turn {i}" for i in range(7)]
    last = await m.call("list_turns", {"limit": 7, "offset": 28})
    assert len(last["turns"]) == 2 and last["next_offset"] is None
    newest = await m.call("list_turns", {"limit": 1, "newest_first": True})
    assert newest["turns"][0]["content"] == "turn 29"
    day = await m.call("list_turns", {"since": "2026-03-02", "until": "2026-03-03", "limit": 50})
    assert [t["content"] for t in day["turns"]] == [f"turn {i}" for i in range(10, 20)]
    family = await m.call("list_turns", {"channel": "terminal", "limit": 50})
    assert {t["channel"] for t in family["turns"]} == {"terminal:abc"}  # not 'terminalx'
    jeff = await m.call("list_turns", {"author": "jeff", "channel": "discord:x", "limit": 50})
    assert jeff["total"] == 5 and {(t["author_name"], t["channel"]) for t in jeff["turns"]} == {("Jeff", "discord:x")}
    assert page["turns"][0]["summary_id"] is None and page["turns"][0]["local_time"].endswith("+00:00")
    chosen = await m.call("list_turns", {"ids": [page["turns"][3]["id"], page["turns"][1]["id"], 99999]})
    assert [t["content"] for t in chosen["turns"]] == ["turn 1", "turn 3"] and chosen["total"] == 2
    with pytest.raises(InvalidParams) as info:
        await m.call("list_turns", {"since": "yesterday-ish"})
    assert info.value.param == "since"


async def test_activity_counts_per_local_day_and_channel(make_memory):
    m = await make_memory(plugins=["sqlite"], timezone="America/Chicago")  # UTC-6 in March before DST
    at = ["2026-03-02T05:59:00Z", "2026-03-02T06:00:00Z", "2026-03-02T06:01:00Z", "2026-03-03T05:00:00Z"]
    await m.call("store_messages", {"messages": [_turn(i, "terminal" if i else "discord", "J", t)
                                                 for i, t in enumerate(at)]})
    out = await m.call("turn_activity", {"days": 3, "until": "2026-03-02T12:00:00"})
    assert (out["first"], out["last"], out["zone"]) == ("2026-02-28", "2026-03-02", "America/Chicago")
    by_day = {d["date"]: d["turns"] for d in out["days"]}
    assert by_day == {"2026-02-28": {}, "2026-03-01": {"discord": 1}, "2026-03-02": {"terminal": 3}}
    assert out["channels"] == {"terminal": 3, "discord": 1}


async def test_activity_in_a_zone_off_the_hour(make_memory):
    m = await make_memory(plugins=["sqlite"], timezone="Asia/Kolkata")  # UTC+5:30: midnight is 18:30 UTC
    await m.call("store_messages", {"messages": [_turn(0, "c", "J", "2026-03-01T18:29:00Z"),
                                                 _turn(1, "c", "J", "2026-03-01T18:31:00Z")]})
    out = await m.call("turn_activity", {"days": 2, "until": "2026-03-02T10:00:00"})
    assert [d["total"] for d in out["days"]] == [1, 1]


async def test_backlog_is_stored_minus_summarized_at_each_day_end(make_memory):
    m = await make_memory(plugins=["sqlite"])
    stored = await m.call("store_messages", {"messages": [_turn(i, "c", "J", None) for i in range(6)]})
    out = await m.call("turn_activity", {"days": 2})
    assert [d["backlog"] for d in out["days"]] == [0, 6]
    await m.call("store_summary", {"summary_text": "s", "message_ids": stored["ids"][:4]})
    out = await m.call("turn_activity", {"days": 2})
    assert [d["backlog"] for d in out["days"]] == [0, 2] and out["days"][1]["total"] == 6
    listed = await m.call("list_turns", {"limit": 6})
    assert [t["summary_id"] is not None for t in listed["turns"]] == [True] * 4 + [False] * 2

"""The navigation operations of reference/001, every edge case listed there."""

from datetime import UTC, datetime, timedelta

import pytest

from pps_core.errors import InvalidParams


async def hours(make_memory, n=60, **settings):
    """n turns, one a minute from 2026-01-26 10:00 UTC."""
    m = await make_memory(plugins=["sqlite"], **settings)
    start = datetime(2026, 1, 26, 10, 0, tzinfo=UTC)
    turns = [{"content": f"turn {i}", "author_name": "A", "channel": "c",
              "created_at": (start + timedelta(minutes=i)).isoformat()} for i in range(n)]
    for start in range(0, n, 1000):
        await m.call("store_messages", {"messages": turns[start:start + 1000]})
    return m


async def test_around_noon_splits_evenly(make_memory):
    m = await hours(make_memory, 120)
    out = await m.call("get_turns_around", {"timestamp": "2026-01-26T11:00:00Z", "count": 40})
    assert (out["before_count"], out["after_count"], out["total_count"]) == (20, 20, 40)
    assert out["messages"][19]["content"] == "turn 59" and out["messages"][20]["content"] == "turn 60"


async def test_around_start_of_history_has_only_after(make_memory):
    m = await hours(make_memory)
    out = await m.call("get_turns_around", {"timestamp": "2026-01-01T00:00:00Z", "count": 40})
    assert (out["before_count"], out["after_count"]) == (0, 40)


async def test_around_end_of_history_has_only_before(make_memory):
    m = await hours(make_memory)
    out = await m.call("get_turns_around", {"timestamp": "2027-01-01T00:00:00Z", "count": 10})
    assert (out["before_count"], out["after_count"]) == (10, 0)
    assert out["messages"][-1]["content"] == "turn 59"


async def test_before_ratio_moves_the_window_and_is_clamped(make_memory):
    m = await hours(make_memory, 120)
    out = await m.call("get_turns_around", {"timestamp": "2026-01-26T11:00:00Z", "count": 40, "before_ratio": 0.7})
    assert (out["before_count"], out["after_count"]) == (28, 12)
    low = await m.call("get_turns_around", {"timestamp": "2026-01-26T11:00:00Z", "count": 10, "before_ratio": -3})
    high = await m.call("get_turns_around", {"timestamp": "2026-01-26T11:00:00Z", "count": 10, "before_ratio": 9})
    assert (low["before_count"], low["after_count"]) == (0, 10)
    assert (high["before_count"], high["after_count"]) == (10, 0)


async def test_count_zero_is_empty(make_memory):
    m = await hours(make_memory)
    out = await m.call("get_turns_around", {"timestamp": "2026-01-26T10:30:00Z", "count": 0})
    assert out["total_count"] == 0 and out["messages"] == []


async def test_invalid_timestamp_shows_the_expected_format(make_memory):
    m = await hours(make_memory)
    for op in ("get_turns_around", "get_turns_since"):
        with pytest.raises(InvalidParams) as err:
            await m.call(op, {"timestamp": "next tuesday"})
        assert err.value.param == "timestamp" and "2026-01-26T07:30:00" in err.value.message


async def test_since_future_is_empty_and_before_everything_is_all(make_memory):
    m = await hours(make_memory)
    future = await m.call("get_turns_since", {"timestamp": "2030-01-01T00:00:00"})
    assert future["messages_count"] == 0 and future["messages"] == []
    everything = await m.call("get_turns_since", {"timestamp": "2000-01-01T00:00:00"})
    assert everything["messages_count"] == 60 and everything["truncated"] is False
    assert [t["content"] for t in everything["messages"][:2]] == ["turn 0", "turn 1"]


async def test_since_a_year_before_1000_is_still_before_everything(make_memory):
    m = await hours(make_memory)
    out = await m.call("get_turns_since", {"timestamp": "0999-01-01T00:00:00Z"})
    assert out["timestamp_start_utc"] == "0999-01-01T00:00:00.000Z"
    assert out["messages_count"] == 60


async def test_since_default_limit_is_1000(make_memory):
    m = await hours(make_memory, 1005)
    out = await m.call("get_turns_since", {"timestamp": "2000-01-01T00:00:00"})
    assert out["messages_count"] == 1000 and out["truncated"] is True and out["limit"] == 1000


async def test_since_naive_timestamp_is_in_the_entity_zone(make_memory):
    m = await hours(make_memory, timezone="Asia/Tokyo")
    out = await m.call("get_turns_since", {"timestamp": "2026-01-26T19:30:00"})  # 10:30 UTC
    assert out["messages_count"] == 30 and out["messages"][0]["content"] == "turn 30"


async def test_since_summaries_toggle(make_memory):
    m = await hours(make_memory)
    await m.call("store_summary", {"summary_text": "morning", "message_ids": list(range(1, 31))})
    with_s = await m.call("get_turns_since", {"timestamp": "2026-01-26T10:20:00Z"})
    without = await m.call("get_turns_since", {"timestamp": "2026-01-26T10:20:00Z", "include_summaries": False})
    assert with_s["summaries_count"] == 1 and without["summaries_count"] == 0
    late = await m.call("get_turns_since", {"timestamp": "2026-01-26T10:45:00Z"})
    assert late["summaries_count"] == 0


async def test_conversation_context_raw_only_when_enough_unsummarized(make_memory):
    m = await hours(make_memory, 100)
    out = await m.call("get_conversation_context", {"turns": 50})
    assert out["raw_turns_count"] == 50 and out["summaries_count"] == 0
    assert out["raw_turns"][-1]["content"] == "turn 99"


async def test_conversation_context_blends_summaries(make_memory):
    m = await hours(make_memory, 240)
    for start in range(1, 201, 50):
        await m.call("store_summary", {"summary_text": f"block {start}", "start_id": start, "end_id": start + 49})
    out = await m.call("get_conversation_context", {"turns": 200})
    assert out["unsummarized_count"] == 40 and out["raw_turns_count"] == 40
    assert out["summaries_count"] == 4  # ceil(160 / 50)
    assert [s["summary_text"] for s in out["summaries"]] == ["block 1", "block 51", "block 101", "block 151"]
    assert out["turns_covered_approx"] == 240


async def test_conversation_context_more_than_history_returns_everything(make_memory):
    m = await hours(make_memory, 30)
    await m.call("store_summary", {"summary_text": "early", "start_id": 1, "end_id": 10})
    out = await m.call("get_conversation_context", {"turns": 500})
    assert out["raw_turns_count"] == 20 and out["summaries_count"] == 1


async def test_conversation_context_zero_and_no_unsummarized(make_memory):
    m = await hours(make_memory, 10)
    zero = await m.call("get_conversation_context", {"turns": 0})
    assert zero["raw_turns"] == [] and zero["summaries"] == [] and zero["turns_covered_approx"] == 0
    await m.call("store_summary", {"summary_text": "all", "start_id": 1, "end_id": 10})
    only = await m.call("get_conversation_context", {"turns": 20})
    assert only["raw_turns_count"] == 0 and only["summaries_count"] == 1


async def test_turns_since_summary_pages_each_turn_exactly_once(make_memory):
    m = await hours(make_memory, 500)
    for oldest_first in (False, True):
        seen, offset = [], 0
        while offset is not None:
            page = await m.call("get_turns_since_summary",
                                {"limit": 37, "offset": offset, "oldest_first": oldest_first})
            ids = [t["id"] for t in page["turns"]]
            assert ids == sorted(ids)
            seen += ids
            offset = page["next_offset"]
        assert sorted(seen) == list(range(1, 501)) and len(seen) == 500


async def test_navigation_rejects_negative_counts(make_memory):
    m = await hours(make_memory, 5)
    for op, params, name in [("get_turns_around", {"timestamp": "2026-01-26T10:00:00", "count": -1}, "count"),
                             ("get_conversation_context", {"turns": -5}, "turns"),
                             ("get_turns_since_summary", {"offset": -1}, "offset"),
                             ("get_turns_since", {"timestamp": "2026-01-26", "limit": 0}, "limit")]:
        with pytest.raises(InvalidParams) as err:
            await m.call(op, params)
        assert err.value.param == name

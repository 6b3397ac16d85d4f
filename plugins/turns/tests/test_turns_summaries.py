import pytest

from pps_core.errors import Conflict, InvalidParams, NotFound


async def seeded(make_memory, n=10):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_messages", {"messages": [
        {"content": f"turn {i}", "author_name": "Lyra" if i % 2 else "Jeff", "channel": "terminal",
         "created_at": f"2026-01-26T10:{i:02d}:00"} for i in range(1, n + 1)]})
    return m


async def test_summarize_then_store_marks_exactly_those_turns(make_memory):
    m = await seeded(make_memory)
    batch = await m.call("summarize_messages", {"limit": 4})
    assert batch["message_ids"] == [1, 2, 3, 4] and batch["unsummarized_count"] == 10
    assert "Lyra: turn 1" in batch["transcript"]
    s = await m.call("store_summary", {"summary_text": "Lyra and Jeff counted.", "message_ids": batch["message_ids"]})
    assert (s["start_id"], s["end_id"], s["message_count"]) == (1, 4, 4)
    assert s["time_span_start"] == "2026-01-26T10:01:00.000Z" and s["channels"] == ["terminal"]
    stats = await m.call("summary_stats")
    assert stats["unsummarized_count"] == 6 and stats["total_messages"] == 10 and stats["summary_count"] == 1


async def test_range_mode_and_its_refusals(make_memory):
    m = await seeded(make_memory)
    with pytest.raises(InvalidParams, match="reversed"):
        await m.call("store_summary", {"summary_text": "x", "start_id": 5, "end_id": 2})
    with pytest.raises(NotFound, match="no turns"):
        await m.call("store_summary", {"summary_text": "x", "start_id": 50, "end_id": 60})
    await m.call("store_summary", {"summary_text": "first", "start_id": 1, "end_id": 3})
    with pytest.raises(Conflict, match=r"already summarized: \[3\]"):
        await m.call("store_summary", {"summary_text": "overlap", "start_id": 3, "end_id": 5})
    stats = await m.call("summary_stats")
    assert stats["summary_count"] == 1 and stats["unsummarized_count"] == 7


async def test_missing_range_and_unknown_ids_are_named(make_memory):
    m = await seeded(make_memory)
    with pytest.raises(InvalidParams) as err:
        await m.call("store_summary", {"summary_text": "x", "start_id": 1})
    assert "message_ids, or both start_id and end_id" in err.value.message
    with pytest.raises(NotFound) as err:
        await m.call("store_summary", {"summary_text": "x", "message_ids": [1, 99]})
    assert err.value.param == "message_ids" and "[99]" in err.value.message
    assert (await m.call("summary_stats"))["summary_count"] == 0


async def test_backfilled_turn_is_not_swallowed(make_memory):
    m = await seeded(make_memory, n=4)
    batch = await m.call("summarize_messages", {"limit": 4})
    late = await m.call("store_message", {"content": "backfilled from yesterday", "author_name": "Jeff",
                                          "channel": "email", "created_at": "2026-01-25T09:00:00"})
    await m.call("store_summary", {"summary_text": "s", "start_id": batch["start_id"], "end_id": batch["end_id"]})
    left = await m.call("get_turns_since_summary", {})
    assert [t["id"] for t in left["turns"]] == [late["id"]]
    startup = await m.call("ambient_recall", {"context": "startup"})
    assert "backfilled from yesterday" in startup["text"]


async def test_recent_and_search_summaries(make_memory):
    m = await seeded(make_memory)
    await m.call("store_summary", {"summary_text": "We fixed the lighthouse lamp.", "message_ids": [1, 2]})
    await m.call("store_summary", {"summary_text": "Planning the garden beds.", "message_ids": [3]})
    recent = await m.call("get_recent_summaries", {"limit": 5})
    assert [s["summary_text"] for s in recent["summaries"]] == ["Planning the garden beds.",
                                                               "We fixed the lighthouse lamp."]
    found = await m.call("search_summaries", {"query": "what happened with the lighthouse?"})
    assert found["count"] == 1 and "lighthouse" in found["results"][0]["summary_text"]


async def test_summary_event_reaches_plugins(make_memory):
    from pps_core import hookimpl

    seen = []

    class Listener:
        @hookimpl
        def pps_summary_stored(self, memory, summary):
            seen.append(summary.message_count)

        @hookimpl
        def pps_turn_copies(self, memory):
            return []

    m = await make_memory(plugins=["sqlite"], extra_plugins=[Listener()])
    await m.call("store_message", {"content": "a", "author_name": "A", "channel": "c"})
    await m.call("store_summary", {"summary_text": "s", "message_ids": [1]})
    assert seen == [1]

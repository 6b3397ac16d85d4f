"""Turns are ordered by the time they were said (created_at, then id), not by arrival: a backfilled or
imported turn takes its place in time in startup, budgets, quotas, summaries, navigation and polls."""


NOW = "2026-02-20T12:00:00Z"
MONTH_AGO = "2026-01-20T12:00:00Z"


async def backfilled(make_memory, **settings):
    """A turn said now, then (stored later) one said a month ago."""
    m = await make_memory(plugins=["sqlite"], **settings)
    await m.call("store_message", {"content": "said today", "author_name": "Jeff", "channel": "terminal:a",
                                   "created_at": NOW})
    await m.call("store_message", {"content": "said last month", "author_name": "Jeff", "channel": "terminal:a",
                                   "created_at": MONTH_AGO})
    return m


async def test_startup_lists_a_backfilled_turn_first(make_memory):
    m = await backfilled(make_memory)
    text = (await m.call("ambient_recall", {"context": "startup"}))["text"]
    assert text.index("said last month") < text.index("said today")


async def test_a_budget_keeps_the_newest_by_time(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_message", {"content": "today " + "x" * 300, "author_name": "J", "channel": "c",
                                   "created_at": NOW})
    await m.call("store_message", {"content": "old " + "y" * 300, "author_name": "J", "channel": "c",
                                   "created_at": MONTH_AGO})
    out = await m.call("ambient_recall", {"context": "startup", "budget": 900})
    assert "today xxx" in out["text"] and "old yyy" not in out["text"]


async def test_quotas_take_each_channels_newest_by_time(make_memory):
    m = await make_memory(plugins=["sqlite"], startup={"add": [], "sections": [
        {"name": "Recent turns", "layer": "raw_capture", "style": "turns", "count": 2,
         "quotas": {"terminal": 1, "discord": 1}}]})
    await m.call("store_messages", {"messages": [
        {"content": "terminal now", "author_name": "J", "channel": "terminal:a", "created_at": NOW},
        {"content": "discord now", "author_name": "J", "channel": "discord:r", "created_at": NOW},
        {"content": "terminal old", "author_name": "J", "channel": "terminal:a", "created_at": MONTH_AGO}]})
    text = (await m.call("ambient_recall", {"context": "startup"}))["text"]
    assert "terminal now" in text and "discord now" in text and "terminal old" not in text


async def test_summarize_messages_hands_out_the_oldest_by_time(make_memory):
    m = await backfilled(make_memory)
    batch = await m.call("summarize_messages", {"limit": 1})
    assert [t["content"] for t in batch["messages"]] == ["said last month"]
    assert batch["start_id"] == batch["end_id"] == batch["message_ids"][0] == 2


async def test_navigation_pages_by_time(make_memory):
    m = await backfilled(make_memory)
    newest = await m.call("get_turns_since_summary", {"limit": 1})
    assert [t["content"] for t in newest["turns"]] == ["said today"]
    oldest = await m.call("get_turns_since_summary", {"limit": 1, "oldest_first": True})
    assert [t["content"] for t in oldest["turns"]] == ["said last month"]
    ctx = await m.call("get_conversation_context", {"turns": 2})
    assert [t["content"] for t in ctx["raw_turns"]] == ["said last month", "said today"]
    recent = await m.call("ambient_recall", {"context": "anything"})  # recent() feeds other callers too
    layer = m.require_layer("raw_capture")
    assert [r.content for r in await layer.recent(1)] == ["said today"]
    assert recent["startup"] is False


async def test_poll_pages_come_in_time_order(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("poll_channels", {"consumer_key": "k", "channel": "terminal:x"})
    await m.call("store_messages", {"messages": [
        {"content": "now", "author_name": "J", "channel": "discord:r", "created_at": NOW},
        {"content": "backfilled", "author_name": "J", "channel": "discord:r", "created_at": MONTH_AGO}]})
    got = await m.call("poll_channels", {"consumer_key": "k", "channel": "terminal:x"})
    assert [t["content"] for t in got["turns"]] == ["backfilled", "now"]


async def test_unread_preview_shows_the_newest_by_time(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("ambient_recall", {"context": "startup", "consumer_key": "k", "channel": "terminal:x"})
    await m.call("store_messages", {"messages": [
        {"content": f"now {i}", "author_name": "J", "channel": "discord:r", "created_at": f"2026-02-20T12:{i:02d}:00Z"}
        for i in range(10)] + [{"content": "backfilled", "author_name": "J", "channel": "discord:r",
                                "created_at": MONTH_AGO}]})
    out = await m.call("ambient_recall", {"context": "startup", "consumer_key": "k", "channel": "terminal:x"})
    unread = out["text"].split("[unread_from_other_channels]")[1].split("\n---\n")[0]
    assert "now 9" in unread and "now 0" in unread and "backfilled" not in unread


async def test_recent_summaries_are_newest_by_the_time_they_cover(make_memory):
    m = await backfilled(make_memory)
    await m.call("store_summary", {"summary_text": "about today", "message_ids": [1]})
    await m.call("store_summary", {"summary_text": "about last month", "message_ids": [2]})
    got = await m.call("get_recent_summaries", {"limit": 2})
    assert [s["summary_text"] for s in got["summaries"]] == ["about today", "about last month"]


async def test_a_backfill_inside_a_summarys_span_flags_it(make_memory):
    """A turn whose time falls inside a stored summary's span stays unsummarized (it shows in startup and is
    handed out first to summarize); the store's answer names the summary, which is flagged for rewrite, and
    health says how many summaries need it."""
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_messages", {"messages": [
        {"content": f"turn {i}", "author_name": "J", "channel": "c", "created_at": f"2026-01-26T10:0{i}:00Z"}
        for i in range(4)]})
    s = await m.call("store_summary", {"summary_text": "four turns", "message_ids": [1, 2, 3, 4]})
    outside = await m.call("store_message", {"content": "after it", "author_name": "J", "channel": "c",
                                             "created_at": "2026-01-26T11:00:00Z"})
    assert "inside_summaries" not in outside
    inside = await m.call("store_message", {"content": "forgotten aside", "author_name": "J", "channel": "c",
                                            "created_at": "2026-01-26T10:01:30Z"})
    assert inside["inside_summaries"] == [s["id"]]
    batch = await m.call("summarize_messages", {"limit": 1})
    assert batch["message_ids"] == [inside["id"]]
    flagged = (await m.call("get_recent_summaries", {"limit": 5}))["summaries"][0]
    assert flagged["rewrite"] == "backfill"
    health = await m.health()
    assert health["message_summaries"].counts["needs_rewrite"] == 1
    stats = await m.call("summary_stats")
    assert stats["needs_rewrite"] == [{"id": s["id"], "reason": "backfill"}]



"""Forgetting turns (by ids, by a time range of a channel, by a confirmed search) and private spans: what is
forgotten is gone from every store (read directly), from recall and from a backup taken afterwards."""

import json

import pytest

from pps_core.errors import InvalidParams, NotFound

SECRET = "zebrapassword4417"


async def seeded(make_memory, **settings):
    m = await make_memory(plugins=["sqlite"], **settings)
    await m.call("store_messages", {"messages": [
        {"content": "we talked about the garden", "author_name": "Jeff", "channel": "terminal:a",
         "created_at": "2026-01-26T10:00:00Z"},
        {"content": f"my password is {SECRET} do not keep it", "author_name": "Jeff", "channel": "terminal:a",
         "created_at": "2026-01-26T10:01:00Z"},
        {"content": "the garden needs water", "author_name": "Lyra", "channel": "discord:r",
         "created_at": "2026-01-26T10:02:00Z"}]})
    return m


async def fts_hits(m, backend, word: str) -> int:
    store = m.require_layer("raw_capture").backend
    if backend == "sqlite":
        return await store.db.run(lambda c: c.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?",
                                                       (word,)).fetchone()[0], store.db.conn)
    if backend == "memstore":
        return sum(word in t["content"] for t in store.d["turns"].values())
    return (await store.fetch("SELECT count(*) AS n FROM messages WHERE tsv @@ plainto_tsquery('english', %s)",
                              (word,)))[0]["n"]


async def test_forget_by_ids_is_gone_everywhere_and_logged(make_memory, backend):
    m = await seeded(make_memory)
    assert (await m.call("raw_search", {"query": SECRET}))["count"] == 1
    out = await m.call("forget_turns", {"ids": [2, 99], "requested_by": "Jeff"})
    assert out["forgotten"] == [2] and out["not_found"] == [99] and out["count"] == 1
    assert (await m.call("raw_search", {"query": SECRET}))["count"] == 0
    assert await fts_hits(m, backend, SECRET) == 0
    startup = await m.call("ambient_recall", {"context": "startup"})
    assert SECRET not in startup["text"] and "garden needs water" in startup["text"]
    assert SECRET not in json.dumps(await m.call("ambient_recall", {"context": "password"}))
    assert (await m.call("summary_stats"))["total_messages"] == 2
    log = await m.call("forget_log", {})
    assert log["total"] == 1 and log["entries"][0]["turn_ids"] == [2] and log["entries"][0]["who"] == "Jeff"
    assert log["entries"][0]["how"] == "ids" and SECRET not in json.dumps(log)
    again = await m.call("forget_turns", {"ids": [2]})  # idempotent: nothing left to forget, nothing logged
    assert again["forgotten"] == [] and (await m.call("forget_log", {}))["total"] == 1


async def test_forget_a_time_range_of_one_channel(make_memory):
    m = await seeded(make_memory)
    out = await m.call("forget_range", {"channel": "terminal", "since": "2026-01-26T10:00:30Z",
                                        "until": "2026-01-26T11:00:00Z"})
    assert out["forgotten"] == [2]  # the discord turn in the same minutes stays, the 10:00 terminal turn too
    left = await m.call("get_turns_since", {"timestamp": "2026-01-01"})
    assert [t["id"] for t in left["messages"]] == [1, 3]
    with pytest.raises(InvalidParams) as err:
        await m.call("forget_range", {"channel": "terminal", "since": "2026-01-27", "until": "2026-01-26"})
    assert err.value.param == "since"


async def test_forget_search_deletes_only_what_was_confirmed(make_memory):
    m = await seeded(make_memory)
    first = await m.call("forget_search", {"query": SECRET})
    assert [t["id"] for t in first["matches"]] == [2] and first["confirm"]
    assert (await m.call("raw_search", {"query": SECRET}))["count"] == 1  # nothing deleted yet
    with pytest.raises(NotFound) as err:
        await m.call("forget_search", {"query": "garden", "confirm": first["confirm"]})  # another query
    assert err.value.param == "confirm"
    done = await m.call("forget_search", {"query": SECRET, "confirm": first["confirm"]})
    assert done["forgotten"] == [2]
    with pytest.raises(NotFound):  # a token works once
        await m.call("forget_search", {"query": SECRET, "confirm": first["confirm"]})
    assert (await m.call("forget_log", {}))["entries"][0]["how"] == "search"


async def test_a_summary_of_a_forgotten_turn_goes_and_its_other_turns_return_to_the_backlog(make_memory):
    """Issue 22 item 4: a summary quoting a forgotten turn was only flagged, and served word for word."""
    m = await seeded(make_memory)
    s = await m.call("store_summary", {"summary_text": f"Jeff shared the password {SECRET}", "message_ids": [1, 2]})
    assert (await m.call("summary_stats"))["unsummarized_count"] == 1
    out = await m.call("forget_turns", {"ids": [2]})
    assert out["summaries_removed"] == [s["id"]] and out["returned_to_backlog"] == 1
    assert (await m.call("get_recent_summaries", {"limit": 10}))["summaries"] == []
    assert (await m.call("search_summaries", {"query": SECRET}))["count"] == 0
    startup = await m.call("ambient_recall", {"context": "startup"})
    assert SECRET not in startup["text"] and "we talked about the garden" in startup["text"]
    backlog = await m.call("get_turns_since_summary", {"oldest_first": True})
    assert [t["id"] for t in backlog["turns"]] == [1, 3]  # turn 1 is unsummarized again, to be summarized anew
    assert (await m.call("forget_log", {}))["entries"][0]["summaries_removed"] == [s["id"]]


async def test_the_forget_log_keeps_ids_time_and_who_and_no_channel_name(make_memory):
    """Issue 22 item 6: forget_range logged the channel's name."""
    m = await seeded(make_memory)
    await m.call("forget_range", {"channel": "terminal:a", "since": "2026-01-26", "until": "2026-01-27",
                                  "requested_by": "ana"})
    entry = (await m.call("forget_log", {}))["entries"][0]
    assert entry["how"] == "range" and entry["who"] == "ana" and entry["turn_ids"] == [1, 2]
    assert "terminal" not in json.dumps(entry)


async def test_a_forgotten_turn_is_never_stored_again_by_its_message_id(make_memory):
    """Issue 22 item 9: importing again (same message_ids) after forgetting resurrected the turns."""
    m = await make_memory(plugins=["sqlite"])
    turn = {"content": f"imported {SECRET}", "author_name": "Jeff", "channel": "import",
            "message_id": "claude-code:5f3c:0001", "created_at": "2026-01-26T10:00:00Z"}
    first = await m.call("store_message", turn)
    await m.call("forget_turns", {"ids": [first["id"]]})
    again = await m.call("store_message", turn)
    assert again["stored"] is False and again["forgotten"] is True and again["id"] is None
    batch = await m.call("store_messages", {"messages": [turn, {**turn, "message_id": "other", "content": "new"}]})
    assert batch["stored"] == 1 and batch["forgotten"] == 1
    assert (await m.call("raw_search", {"query": SECRET}))["count"] == 0
    assert (await m.call("summary_stats"))["total_messages"] == 1


async def test_forget_search_lists_only_turns_holding_a_word_of_the_query_with_scores(make_memory):
    """Issue 22 item 11: matches found only by meaning were offered for deletion, with no score."""
    m = await make_memory(plugins=["sqlite", "embeddings"])
    await m.call("store_messages", {"messages": [
        {"content": "Good morning", "author_name": "Jeff", "channel": "c"},
        {"content": "My bank PIN is 4512", "author_name": "Jeff", "channel": "c"},
        {"content": "the bank opens at nine", "author_name": "Jeff", "channel": "c"},
        {"content": "Is the cottage pantry sealed now?", "author_name": "Lyra", "channel": "c"}]})
    await m.require_layer("raw_capture").retriever.drain()
    first = await m.call("forget_search", {"query": "bank PIN"})
    assert [t["content"] for t in first["matches"]] == ["My bank PIN is 4512", "the bank opens at nine"]
    assert first["matches"][0]["matched"] == ["bank", "pin"] and first["matches"][1]["matched"] == ["bank"]
    assert first["matches"][0]["score"] > first["matches"][1]["score"] >= 0  # BM25: a word in half the turns weighs ~0
    none = await m.call("forget_search", {"query": "mouse in the attic"})
    assert none["count"] == 0 and none["confirm"] is None


async def test_a_forget_search_token_is_redeemed_by_another_process(make_memory, pps_home):
    """Issue 22 item 11: the token lived in one process's memory, so `pps call` could never confirm."""
    m = await seeded(make_memory)
    first = await m.call("forget_search", {"query": SECRET})
    await m.close()
    other = await make_memory(plugins=["sqlite"])  # the same entity, opened again: a new process's view
    done = await other.call("forget_search", {"query": SECRET, "confirm": first["confirm"]})
    assert done["forgotten"] == [2]
    with pytest.raises(NotFound):
        await other.call("forget_search", {"query": SECRET, "confirm": first["confirm"]})


async def test_forgotten_vectors_are_deleted(make_memory, stored_vectors):
    m = await make_memory(plugins=["sqlite", "embeddings"])
    await m.call("store_messages", {"messages": [
        {"content": f"turn about topic {i}", "author_name": "J", "channel": "c"} for i in range(3)]})
    raw = m.require_layer("raw_capture")
    await raw.retriever.drain()
    assert (await stored_vectors(m, "message_vectors"))[0] == 3
    await m.call("forget_turns", {"ids": [2]})
    assert (await stored_vectors(m, "message_vectors"))[0] == 2
    found = await m.call("raw_search", {"query": "turn about topic 1", "limit": 10})
    assert 2 not in [r["id"] for r in found["results"]]


async def test_private_spans_are_never_stored(make_memory, backend):
    m = await make_memory(plugins=["sqlite"])
    one = await m.call("store_message", {"content": f"login with <private>{SECRET}</private> then deploy",
                                         "author_name": "J", "channel": "c"})
    await m.call("store_messages", {"messages": [
        {"content": f"<PRIVATE>\n{SECRET}\n</PRIVATE>", "author_name": "J", "channel": "c"},
        {"content": f"unclosed <private>{SECRET} to the end", "author_name": "J", "channel": "c"}]})
    turns = (await m.call("get_turns_since_summary", {"oldest_first": True}))["turns"]
    assert [t["content"] for t in turns] == ["login with then deploy", "[private]", "unclosed"]
    assert one["id"] == turns[0]["id"]
    assert await fts_hits(m, backend, SECRET) == 0


async def test_private_spans_in_metadata_are_never_stored(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_message", {"content": "deploy", "author_name": "J", "channel": "c", "metadata": {
        "note": f"key <private>{SECRET}</private>", f"<private>{SECRET}</private>k": [f"<private>{SECRET}</private>"]}})
    await m.call("store_messages", {"messages": [{"content": "again", "author_name": "J", "channel": "c",
                                                  "metadata": {"deep": {"x": f"<private>{SECRET}</private>"}}}]})
    stored = json.dumps((await m.call("get_turns_since_summary", {"oldest_first": True}))["turns"])
    assert SECRET not in stored and '"note": "key"' in stored
    await m.close()
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in m.home.rglob("*") if p.is_file())



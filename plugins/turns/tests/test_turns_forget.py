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


async def test_a_summary_of_a_forgotten_turn_is_flagged_for_rewrite(make_memory):
    m = await seeded(make_memory)
    s = await m.call("store_summary", {"summary_text": "Jeff shared a password", "message_ids": [1, 2]})
    out = await m.call("forget_turns", {"ids": [2]})
    assert out["summaries_flagged"] == [s["id"]]
    assert (await m.call("summary_stats"))["needs_rewrite"] == [{"id": s["id"], "reason": "forgotten"}]
    health = await m.call("pps_health")
    assert health["layers"]["message_summaries"]["counts"]["needs_rewrite"] == 1
    startup = await m.call("ambient_recall", {"context": "startup"})
    assert "1 summaries to rewrite" in startup["text"]


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



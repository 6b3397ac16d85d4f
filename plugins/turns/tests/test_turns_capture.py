
import pytest

from pps_core.errors import InvalidParams

PLUGINS = ["sqlite"]


async def test_store_and_find_a_turn(make_memory):
    m = await make_memory(plugins=PLUGINS)
    ack = await m.call("store_message", {"content": "The kitchen light is flickering again",
                                         "author_name": "Jeff", "channel": "terminal:abc"})
    assert ack["id"] == 1 and ack["stored"] is True and ack["created_at"].endswith("Z")
    found = await m.call("raw_search", {"query": "Why is the kitchen light flickering?"})
    assert [r["id"] for r in found["results"]] == [1]


async def test_repeat_with_same_message_id_stores_nothing_and_answers_the_same(make_memory):
    m = await make_memory(plugins=PLUGINS)
    turn = {"content": "hello", "author_name": "A", "channel": "c", "message_id": "client-1"}
    first = await m.call("store_message", turn)
    again = await m.call("store_message", {**turn, "content": "something else"})
    assert again == first
    batch = await m.call("store_messages", {"messages": [turn, {**turn, "message_id": "client-2"}]})
    assert batch["ids"][0] == first["id"] and batch["ids"][1] == first["id"] + 1
    assert (await m.call("summary_stats"))["total_messages"] == 2


async def test_a_batch_is_all_or_nothing(make_memory):
    m = await make_memory(plugins=PLUGINS)
    good = {"content": "ok", "author_name": "A", "channel": "c"}
    with pytest.raises(InvalidParams) as err:
        await m.call("store_messages", {"messages": [good, {**good, "created_at": "yesterday-ish"}]})
    assert err.value.param == "messages.1.created_at"
    assert (await m.call("summary_stats"))["total_messages"] == 0


async def test_naive_time_is_read_in_the_entity_zone_and_stored_utc(make_memory):
    m = await make_memory(plugins=PLUGINS, timezone="America/New_York")
    ack = await m.call("store_message", {"content": "x", "author_name": "A", "channel": "c",
                                         "created_at": "2026-01-26T07:30:00"})
    assert ack["created_at"] == "2026-01-26T12:30:00.000Z"
    turns = (await m.call("get_turns_since", {"timestamp": "2026-01-26T07:00:00"}))["messages"]
    assert turns[0]["local_time"] == "2026-01-26T07:30:00-05:00"


async def test_a_turn_dated_before_year_1000_is_stored_and_sorts_first(make_memory):
    m = await make_memory(plugins=PLUGINS)
    await m.call("store_message", {"content": "now", "author_name": "A", "channel": "c"})
    ack = await m.call("store_message", {"content": "old", "author_name": "A", "channel": "c",
                                         "created_at": "0999-06-01T12:00:00Z"})
    assert ack["created_at"] == "0999-06-01T12:00:00.000Z"
    turns = (await m.call("get_turns_since", {"timestamp": "0900-01-01T00:00:00Z"}))["messages"]
    assert [t["content"] for t in turns] == ["old", "now"]




@pytest.mark.parametrize("query", ['what about "the" kitchen?', "kitchen AND NOT light", "NEAR(kitchen light)",
                                   "kitchen*", "^kitchen", "content:kitchen", "'; DROP TABLE messages; --",
                                   "kitchen's", "(((", "¿qué pasa en la cocina?"])
async def test_free_text_never_errors_and_still_finds(make_memory, query):
    m = await make_memory(plugins=PLUGINS)
    await m.call("store_message", {"content": "the kitchen light", "author_name": "A", "channel": "c"})
    found = await m.call("raw_search", {"query": query})
    if "kitchen" in query.lower():
        assert found["count"] == 1


async def test_only_stop_words_still_search(make_memory):
    m = await make_memory(plugins=PLUGINS)
    await m.call("store_message", {"content": "to be or not to be", "author_name": "A", "channel": "c"})
    assert (await m.call("raw_search", {"query": "to be"}))["count"] == 1


async def test_raw_search_pages(make_memory):
    m = await make_memory(plugins=PLUGINS)
    await m.call("store_messages", {"messages": [
        {"content": f"garden note {i} " + "garden " * i, "author_name": "A", "channel": "c"} for i in range(1, 8)]})
    first = await m.call("raw_search", {"query": "garden", "limit": 3})
    second = await m.call("raw_search", {"query": "garden", "limit": 3, "offset": 3})
    ids1, ids2 = [r["id"] for r in first["results"]], [r["id"] for r in second["results"]]
    assert len(ids1) == 3 and len(ids2) == 3 and not set(ids1) & set(ids2)


async def test_channel_filter(make_memory):
    m = await make_memory(plugins=PLUGINS)
    await m.call("store_messages", {"messages": [
        {"content": "tea time", "author_name": "A", "channel": "discord:x"},
        {"content": "tea again", "author_name": "A", "channel": "terminal"}]})
    found = await m.call("raw_search", {"query": "tea", "channel": "terminal"})
    assert [r["channel"] for r in found["results"]] == ["terminal"]






async def test_stored_event_reaches_plugins(make_memory):
    from pps_core import hookimpl

    seen = []

    class Listener:
        @hookimpl
        def pps_message_stored(self, memory, message):
            seen.append((message.id, message.content))

        @hookimpl
        def pps_turn_copies(self, memory):
            return []  # keeps only what the test asserts

    m = await make_memory(plugins=PLUGINS, extra_plugins=[Listener()])
    await m.call("store_message", {"content": "hi", "author_name": "A", "channel": "c", "message_id": "k"})
    await m.call("store_message", {"content": "hi", "author_name": "A", "channel": "c", "message_id": "k"})
    assert seen == [(1, "hi")]

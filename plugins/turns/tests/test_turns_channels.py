import json


async def test_each_consumer_sees_the_others_turns_once(make_memory):
    m = await make_memory(plugins=["sqlite"])
    consumers = {"term-a": "terminal:a", "term-b": "terminal:b", "bot": "discord:room"}
    for key, channel in consumers.items():  # register: a new consumer starts at now
        first = await m.call("poll_channels", {"consumer_key": key, "channel": channel})
        assert first["new_consumer"] is True and first["turns"] == []
    for key, channel in consumers.items():
        await m.call("store_message", {"content": f"hello from {key}", "author_name": key, "channel": channel})
    for key, channel in consumers.items():
        got = await m.call("poll_channels", {"consumer_key": key, "channel": channel})
        assert sorted(t["content"] for t in got["turns"]) == sorted(
            f"hello from {k}" for k in consumers if k != key)
        again = await m.call("poll_channels", {"consumer_key": key, "channel": channel})
        assert again["turns"] == [] and again["unread_total"] == 0


async def test_new_consumer_is_not_flooded(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_messages", {"messages": [
        {"content": f"old {i}", "author_name": "A", "channel": "email"} for i in range(300)]})
    got = await m.call("poll_channels", {"consumer_key": "late-joiner", "channel": "terminal"})
    assert got["turns"] == [] and got["new_consumer"] is True


async def test_backlog_is_bounded_and_counted(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("poll_channels", {"consumer_key": "k", "channel": "terminal"})
    await m.call("store_messages", {"messages": [
        {"content": f"msg {i}", "author_name": "A", "channel": "discord"} for i in range(120)]})
    page = await m.call("poll_channels", {"consumer_key": "k", "channel": "terminal", "limit": 50})
    assert len(page["turns"]) == 50 and page["unread_total"] == 120 and page["remaining"] == 70
    assert page["turns"][0]["content"] == "msg 0"
    rest = await m.call("poll_channels", {"consumer_key": "k", "channel": "terminal", "limit": 100})
    assert len(rest["turns"]) == 70 and rest["turns"][0]["content"] == "msg 50"


async def test_ambient_recall_shows_unread_from_other_channels(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("ambient_recall", {"context": "startup", "consumer_key": "t1", "channel": "terminal:1"})
    await m.call("store_messages", {"messages": [
        {"content": f"discord says {i}", "author_name": "Jeff", "channel": "discord"} for i in range(15)]
        + [{"content": "my own words", "author_name": "Lyra", "channel": "terminal:1"}]})
    out = await m.call("ambient_recall", {"context": "kitchen", "consumer_key": "t1", "channel": "terminal:1"})
    assert "[unread_from_other_channels] (showing newest 10 of 15 - older: get_turns_since" in out["text"]
    pointer = out["text"].split(" - older: get_turns_since ")[1].split(")\n")[0]
    older = await m.call("get_turns_since", json.loads(pointer))
    assert {f"discord says {i}" for i in range(15)} <= {t["content"] for t in older["messages"]}
    assert "discord says 14" in out["text"] and "discord says 4" not in out["text"]
    again = await m.call("ambient_recall", {"context": "kitchen", "consumer_key": "t1", "channel": "terminal:1"})
    assert "unread_from_other_channels" not in again["text"]

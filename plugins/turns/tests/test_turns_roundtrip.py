"""What you store is what you get back: user metadata under its own keys (even ones that look like derived
fields), on every read path; and the capture operations' MCP hints say what they do."""

STORED = {"dia_id": "D1:3", "kind": "note", "channel": "not-the-channel", "nested": {"a": [1, 2]}}


async def test_metadata_comes_back_under_the_keys_it_was_stored_with(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_message", {"content": "the lighthouse keeper waves", "author_name": "J", "channel": "c:1",
                                   "metadata": STORED})
    plain = (await m.call("raw_search", {"explain": True, "query": "lighthouse keeper"}))["results"][0]
    by_channel = (await m.call("raw_search", {"explain": True, "query": "lighthouse keeper", "channel": "c:1"}))["results"][0]
    since = (await m.call("get_turns_since", {"timestamp": "2000-01-01"}))["messages"][0]
    assert plain["metadata"] == by_channel["metadata"] == since["metadata"] == STORED
    assert plain["channel"] == "c:1" and "scores" in plain  # derived fields stay beside it
    recall = await m.call("ambient_recall", {"context": "lighthouse keeper"})
    turn = next(r for r in recall["results"] if r["layer"] == "raw_capture")
    assert turn["metadata"]["metadata"] == STORED and turn["metadata"]["kind"] == "turn"
    assert turn["metadata"]["channel"] == "c:1"


async def test_capture_hints_match_behaviour(make_memory):
    m = await make_memory(plugins=["sqlite"])
    for name in ("store_message", "store_messages"):
        assert m.operation(name).idempotent is False  # without message_id a repeat stores a second turn
    twice = [await m.call("store_message", {"content": "same", "author_name": "J", "channel": "c"}) for _ in range(2)]
    assert twice[0]["id"] != twice[1]["id"]
    forget = m.operation("forget_turns")
    assert forget.destructive and forget.idempotent and not forget.read_only

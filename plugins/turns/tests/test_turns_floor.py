"""Calibrated scores and the floor (issue 29): on a small entity, a query that shares nothing with any turn
returns nothing, and a turn that shares no content word never outranks one holding the query's rarest word."""

import pytest

COTTAGE = [
    ("Hunter", "Good morning"),
    ("Lyra", "Good morning! The kettle is on."),
    ("Hunter", "I finished mending the fence by the north field."),
    ("Lyra", "My bank PIN is 4512, keep it safe for me."),
    ("Hunter", "Good hunter. Is the cottage pantry sealed now?"),
    ("Lyra", "Yes, I sealed it with tin yesterday."),
    ("Hunter", "The orchard apples are nearly ripe."),
    ("Lyra", "We should bake a pie on Sunday."),
    ("Hunter", "Did you call the electrician about the kitchen light?"),
    ("Lyra", "He comes Thursday afternoon."),
    ("Hunter", "The river was high after the storm."),
    ("Lyra", "I saw two herons by the bridge."),
    ("Hunter", "Remind me to buy lamp oil."),
    ("Lyra", "Added to the list, with candles."),
    ("Hunter", "Good night, sleep well."),
    ("Lyra", "I heard a mouse behind the flour sacks last night."),
    ("Hunter", "The cottage roof needs new thatch before winter."),
]
RAREST = "I heard a mouse behind the flour sacks last night."


async def _entity(make_memory, plugins):
    m = await make_memory(plugins=plugins)
    ids = (await m.call("store_messages", {"messages": [
        {"content": c, "author_name": a, "channel": "chat", "created_at": f"2026-03-02T08:{i:02d}:00"}
        for i, (a, c) in enumerate(COTTAGE)]}))["ids"]
    await m.require_layer("raw_capture").retriever.drain()
    return m, dict(zip(ids, (c for _a, c in COTTAGE), strict=True))


@pytest.mark.parametrize("plugins", [["sqlite"], ["sqlite", "embeddings"]], ids=["lexical", "fused"])
async def test_small_entity_floor(make_memory, plugins):
    if "embeddings" in plugins:
        pytest.importorskip("pps_embeddings")
    m, text = await _entity(make_memory, plugins)
    found = await m.call("raw_search", {"explain": True, "query": "mouse in the cottage"})
    ranked = [text[r["id"]] for r in found["results"]]
    assert ranked, found
    assert ranked[0] == RAREST
    for r in found["results"]:
        assert 0.0 <= r["score"] <= 1.0 and r["score"] >= found["min_score"]
        assert set(r["scores"]) >= {"probability", "coverage", "matched", "bm25", "dense", "fused"}
    assert "Good morning" not in ranked and "My bank PIN is 4512, keep it safe for me." not in ranked

    # nothing shared, in words or meaning: nothing above the floor, and the answer says so
    empty = await m.call("raw_search", {"explain": True, "query": "quantum chromodynamics on a lattice"})
    assert empty["results"] == [] and empty["count"] == 0 and "nothing" in empty["note"]
    # the floor is per call: 0 shows every candidate, still scored the same way
    every = await m.call("raw_search", {"explain": True, "query": "mouse in the cottage", "min_score": 0})
    assert len(every["results"]) >= len(found["results"])
    scores = {text[r["id"]]: r["score"] for r in every["results"]}
    shares = {t for t in scores if {"mouse", "cottage"} & set(t.lower().rstrip(".?!").split())}
    assert all(scores[t] < scores[RAREST] for t in scores if t not in shares), scores

    recall = await m.call("ambient_recall", {"context": "quantum chromodynamics on a lattice"})
    assert not [r for r in recall["results"] if r["layer"] == "raw_capture"]
    gone = await m.call("forget_search", {"query": "quantum chromodynamics", "requested_by": "test"})
    assert gone["matches"] == [] and gone["confirm"] is None


@pytest.mark.parametrize("plugins", [["sqlite"], ["sqlite", "embeddings"]], ids=["lexical", "fused"])
async def test_scores_are_comparable_across_queries(make_memory, plugins):
    """The best turn of a query with no real answer does not look like a strong match: a query's scores are not
    scaled by its own best candidate."""
    if "embeddings" in plugins:
        pytest.importorskip("pps_embeddings")
    m, text = await _entity(make_memory, plugins)
    strong = await m.call("raw_search", {"explain": True, "query": "is the cottage pantry sealed", "min_score": 0})
    weak = await m.call("raw_search", {"explain": True, "query": "the weather in the north of Norway in winter", "min_score": 0})
    assert strong["results"][0]["score"] > 2 * weak["results"][0]["score"]
    # the fused score of the same two (relative to each query's best candidate) cannot tell them apart
    assert strong["results"][0]["scores"]["fused"] < 1.5 * weak["results"][0]["scores"]["fused"]

async def test_forget_search_scores_are_calibrated(make_memory):
    m, text = await _entity(make_memory, ["sqlite"])
    got = await m.call("forget_search", {"query": "my bank PIN", "requested_by": "test"})
    assert [text[x["id"]] for x in got["matches"]][0] == "My bank PIN is 4512, keep it safe for me."
    top = got["matches"][0]
    assert 0 < top["score"] <= 1 and top["scores"]["coverage"] > 0.5 and top["matched"] == ["bank", "pin"]


async def test_the_floor_is_per_call_and_bad_floors_are_refused(make_memory):
    from pps_core.errors import InvalidParams

    m, _text = await _entity(make_memory, ["sqlite"])
    query = "the fence and the bank"
    shown = await m.call("ambient_recall", {"context": query})
    every = await m.call("ambient_recall", {"context": query, "min_score": {"raw_capture": 0}})
    none = await m.call("ambient_recall", {"context": query, "min_score": {"raw_capture": 1}})
    turns = [[r for r in a["results"] if r["layer"] == "raw_capture"] for a in (shown, every, none)]
    assert len(turns[1]) >= len(turns[0]) and turns[2] == []
    for op, params, name in (("raw_search", {"query": "x", "min_score": 2}, "min_score"),
                             ("search_summaries", {"query": "x", "min_score": -0.1}, "min_score"),
                             ("forget_search", {"query": "x", "min_score": "high", "requested_by": "t"}, "min_score"),
                             ("ambient_recall", {"context": "x", "min_score": {"raw_capture": "nan"}}, "min_score")):
        with pytest.raises(InvalidParams) as err:
            await m.call(op, params)
        assert name in str(err.value)


async def test_the_store_counts_the_turns_holding_each_term(make_memory):
    m, _text = await _entity(make_memory, ["sqlite"])
    counted = await m.require_layer("raw_capture").retriever.store.term_counts(["mouse", "cottage", "quantum"], 100)
    assert counted[0] == len(COTTAGE) and counted[1]["cottage"] == 2 and counted[1]["quantum"] == 0

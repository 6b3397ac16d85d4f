"""A floor that keeps the answer by meaning (issue 40): on a small entity, the turn that answers a question without
sharing a word with it clears the floor, and filler that shares only a common word of the question falls under it;
the score a person reads says how the turn matched."""

import pytest

pytest.importorskip("pps_embeddings")

GARDEN = [
    ("Lyra", "Cedar. It resists rot for 10-15 years untreated; pine lasts 3-5 before it needs replacing."),
    ("Jeff", "Ok, I'll pick some up at the lumber yard on Saturday."),
    ("Lyra", "The lighthouse door is painted blue now."),
    ("Jeff", "Did the kettle ever get fixed?"),
    ("Lyra", "Yes, Ada replaced the heating element last week."),
    *[("Jeff", f"timing probe message about the garden {i}") for i in range(6)],
    ("Lyra", "We watched a documentary about deep sea fish tonight."),
    ("Jeff", "My sister is visiting in March, she wants to see the harbour."),
]
ANSWER = GARDEN[0][1]


async def _entity(make_memory):
    m = await make_memory(plugins=["sqlite", "embeddings"])
    await m.call("store_messages", {"messages": [
        {"content": c, "author_name": a, "channel": "terminal:x", "created_at": f"2026-11-25T1{i % 10}:{i:02d}:00Z"}
        for i, (a, c) in enumerate(GARDEN)]})
    await m.require_layer("raw_capture").retriever.drain()
    return m


async def test_the_answer_by_meaning_clears_the_floor_and_word_filler_does_not(make_memory):
    m = await _entity(make_memory)
    found = await m.call("raw_search", {"query": "what wood for the garden beds?"})
    contents = [r["content"] for r in found["results"]]
    assert contents[0] == ANSWER, contents  # shares no word with the question, found by its meaning
    assert found["results"][0]["score"] >= found["min_score"]
    assert not any("timing probe" in c for c in contents), contents  # shares only "garden": under the floor
    every = await m.call("raw_search", {"query": "what wood for the garden beds?", "min_score": 0, "explain": True})
    filler = [r for r in every["results"] if "timing probe" in r["content"]]
    assert filler and all(r["score"] < found["min_score"] for r in filler)
    recalled = await m.call("ambient_recall", {"context": "what wood for the garden beds?"})
    assert ANSWER in recalled["text"] and "timing probe" not in recalled["text"]


async def test_the_listing_says_how_a_turn_matched(make_memory):
    from pps_core.cli_text import readable

    m = await _entity(make_memory)
    by_meaning = readable(await m.call("raw_search", {"query": "what wood for the garden beds?"}))
    by_words = readable(await m.call("raw_search", {"query": "what color is the lighthouse door?"}))
    assert "(by meaning, score " in next(x for x in by_meaning.splitlines()[1:] if "Cedar" in x)
    assert "(strong, score " in next(x for x in by_words.splitlines()[1:] if "lighthouse" in x)

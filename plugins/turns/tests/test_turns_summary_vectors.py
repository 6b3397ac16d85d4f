"""search_summaries is hybrid when an embedder is loaded: a paraphrase with no shared word is found."""

PLUGINS = ["sqlite", "embeddings"]


async def seed(m):
    await m.call("store_messages", {"messages": [
        {"content": f"turn {i}", "author_name": "A", "channel": "c"} for i in range(6)]})
    for ids, text in [([1, 2], "We repaired the leaking kitchen faucet and replaced its washer."),
                      ([3, 4], "Quarterly taxes were filed with the accountant on Friday."),
                      ([5, 6], "Brandi adopted a grey kitten from the animal shelter.")]:
        await m.call("store_summary", {"summary_text": text, "message_ids": ids})


async def test_paraphrase_found_by_meaning(make_memory):
    m = await make_memory(plugins=PLUGINS)
    await seed(m)
    found = await m.call("search_summaries", {"explain": True, "query": "plumbing problem in the sink", "min_score": 0})
    assert found["results"] and "faucet" in found["results"][0]["summary_text"]
    assert found["results"][0]["scores"]["dense"] > 0.25


async def test_lexical_match_still_ranks_first(make_memory):
    m = await make_memory(plugins=PLUGINS)
    await seed(m)
    found = await m.call("search_summaries", {"explain": True, "query": "accountant"})
    assert "taxes" in found["results"][0]["summary_text"]
    assert found["results"][0]["scores"]["bm25"] is not None


async def test_without_an_embedder_it_is_bm25(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await seed(m)
    assert (await m.call("search_summaries", {"explain": True, "query": "plumbing problem in the sink"}))["count"] == 0
    assert (await m.call("search_summaries", {"explain": True, "query": "kitten"}))["count"] == 1


async def test_vectors_are_stored_once(make_memory, pps_home, stored_vectors):
    m = await make_memory(plugins=PLUGINS)
    await seed(m)
    await m.call("search_summaries", {"explain": True, "query": "kitten"})
    await m.call("search_summaries", {"explain": True, "query": "faucet"})
    assert (await stored_vectors(m, "summary_vectors"))[0] == 3

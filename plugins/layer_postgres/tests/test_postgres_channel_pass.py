"""Issue 37: the fused search's per-channel second pass is bounded by the channel. A channel past
``CHANNEL_SCAN`` turns had its nearest turns found by a join that PostgreSQL could (and at 200,000 turns did) plan as
a scan of every turn's vector; now from the HNSW index when enough of its nearest are of that channel, else by an
exact scan of that channel's own rows. Either way the answer is that channel's best turns and nothing else."""

from __future__ import annotations

import numpy as np
from pps_postgres import retrieval


async def test_a_large_channels_own_nearest_turns_by_either_path(make_memory, postgres_section, monkeypatch):
    section = postgres_section("lyra")
    m = await make_memory("lyra", plugins=["postgres"], postgres=section)
    store = m.require_layer("raw_capture").retriever.store
    rng = np.random.default_rng(11)
    chans = ["big"] * 180 + ["mid"] * 90 + ["rare"] * 30
    chans = [chans[i] for i in rng.permutation(len(chans))]
    out = await m.call("store_messages", {"messages": [
        {"content": f"turn {i}", "author_name": "Jeff", "channel": ch} for i, ch in enumerate(chans)]})
    turns = await store.turns_by_ids(out["ids"])
    vecs = rng.normal(size=(len(turns), 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    await store.write_turn_vectors("m", turns, [v.tobytes() for v in vecs])
    await store.dense.settled()
    qvec = rng.normal(size=16).astype(np.float32)
    qvec /= np.linalg.norm(qvec)
    cos = vecs @ qvec
    channel_of = {t["id"]: t["channel"] for t in turns}

    monkeypatch.setattr(retrieval, "CHANNEL_SCAN", 5)  # every channel is "large": the bounded path
    monkeypatch.setattr(retrieval, "EF_SEARCH_MAX", 40)  # the index's 40 nearest hold 10 of big's, not of rare's
    for ch in ("big", "mid", "rare"):
        want = [turns[k]["id"] for k in np.argsort(-cos) if turns[k]["channel"] == ch][:5]
        ids, got_cos = await store.channel_similarities("m", qvec, [ch], 5, 0.0)
        got = [int(i) for i in ids[np.argsort(-got_cos)][:5]]
        assert {channel_of[i] for i in got} == {ch}, (ch, got)
        if ch == "rare":  # too few among the index's nearest: the exact scan of the channel's rows
            assert got == want, ch
        else:  # from the index (approximate, as the first pass): nearly the exact answer
            assert len(set(got) & set(want)) >= 4, (ch, got, want)
    # a search of one channel takes the same path
    found = await store.turn_similarities("m", qvec, 5, 0.0, "rare")
    assert {channel_of[int(i)] for i in found[0]} == {"rare"}


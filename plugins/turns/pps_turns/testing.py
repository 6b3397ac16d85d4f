"""The store contract: what every :class:`~pps_turns.store.TurnStore` must do, called directly (no layer, no
operation). Subclass it in a store's tests and say how to open one::

    class TestMyStoreContract(TurnStoreContract):
        async def open_store(self, tmp_path, request):
            return MyStore(tmp_path / "turns.db")

The turn-operation suite (``plugins/turns/tests``, parametrized over stores by ``PPS_TEST_BACKENDS``) checks the
same store through every operation. Tests are marked for pytest-asyncio, so a store's tests need no config.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio

from pps_core.errors import Conflict, InvalidParams, NotFound

from .store import TurnStore


def turn(content: str, *, at: str, author: str = "Jeff", channel: str = "terminal:a", **extra: Any) -> dict[str, Any]:
    return {"content": content, "author_name": author, "channel": channel, "created_at": at, "session_id": None,
            "metadata": {}, "message_id": None, **extra}


def at(minute: int, day: int = 26) -> str:
    return f"2026-01-{day:02d}T10:{minute:02d}:00.000Z"


def unit(*xs: float) -> bytes:
    import numpy as np

    v = np.asarray(xs, dtype=np.float32)
    return (v / np.linalg.norm(v)).tobytes()


class TurnStoreContract:
    """Subclass as ``TestXStoreContract`` and implement :meth:`open_store` (the store, not yet opened)."""

    pytestmark = pytest.mark.asyncio

    async def open_store(self, tmp_path: Any, request: Any) -> TurnStore:  # pragma: no cover - abstract
        raise NotImplementedError

    @pytest_asyncio.fixture
    async def store(self, tmp_path: Any, request: Any) -> Any:
        store = await self.open_store(tmp_path, request)
        assert isinstance(store, TurnStore), f"{type(store).__name__} lacks methods of pps_turns.TurnStore"
        await store.open()
        try:
            yield store
        finally:
            await store.close()

    async def test_store_acks_in_order_and_a_repeat_answers_as_the_first(self, store: TurnStore) -> None:
        acks, new = await store.store([turn("one", at=at(1), message_id="m1"), turn("two", at=at(2))])
        assert [a["id"] for a in acks] == [t["id"] for t in new] and acks[0]["id"] < acks[1]["id"]
        assert acks[0] == {"id": new[0]["id"], "message_id": "m1", "created_at": at(1), "channel": "terminal:a"}
        again, fresh = await store.store([turn("one, resent", at=at(3), message_id="m1")])
        assert again == [acks[0]] and fresh == []
        got = await store.turns_by_ids([acks[1]["id"], 999_999, acks[0]["id"]])
        assert [t["content"] for t in got] == ["two", "one"]
        assert set(got[0]) >= {"id", "message_id", "content", "author_name", "channel", "session_id", "created_at",
                                "metadata", "summary_id"}
        counts = await store.counts()
        assert (counts["total"], counts["unsummarized"], counts["uningested"]) == (2, 2, 2)
        assert await store.author_names() == ["Jeff"]

    async def test_pages_are_in_time_order_whatever_the_arrival(self, store: TurnStore) -> None:
        _acks, new = await store.store([turn(f"t{m}", at=at(m), channel="a:x" if m % 2 else "b")
                                        for m in (5, 1, 4, 2, 3)])
        by = {t["content"]: t["id"] for t in new}
        total, page = await store.unsummarized_page(2)
        assert total == 5 and [t["content"] for t in page] == ["t4", "t5"]
        total, page = await store.unsummarized_page(2, 0, oldest_first=True)
        assert [t["content"] for t in page] == ["t1", "t2"]
        total, page = await store.unsummarized_page(None, channel="a:x")
        assert total == 3 and [t["content"] for t in page] == ["t1", "t3", "t5"]
        assert [t["content"] for t in await store.newest(2)] == ["t4", "t5"]
        msgs, more, _sums = await store.since(at(3), 2, False)
        assert [t["content"] for t in msgs] == ["t3", "t4"] and more
        before, after = await store.around(at(2), 3, 1)  # only one turn before: the other side lends
        assert [t["content"] for t in before] == ["t1"] and [t["content"] for t in after] == ["t2", "t3", "t4"]
        assert await store.in_range("a", at(1), at(5)) == [by["t1"], by["t3"]]  # "a" is "a:*" too; until excluded

    async def test_summaries_mark_exactly_their_turns_or_nothing(self, store: TurnStore) -> None:
        _acks, new = await store.store([turn(f"t{m}", at=at(m)) for m in range(1, 5)])
        ids = [t["id"] for t in new]
        with pytest.raises(NotFound):
            await store.store_summary("s", start_id=None, end_id=None, message_ids=[ids[0], 999_999],
                                      channels=None, summary_type="work")
        with pytest.raises(InvalidParams):
            await store.store_summary("s", start_id=ids[2], end_id=ids[0], message_ids=None, channels=None,
                                      summary_type="work")
        s = await store.store_summary("first two", start_id=None, end_id=None, message_ids=ids[:2], channels=None,
                                      summary_type="work")
        assert (s["start_id"], s["end_id"], s["message_count"], s["channels"]) == (ids[0], ids[1], 2, ["terminal:a"])
        assert (s["time_span_start"], s["time_span_end"], s["rewrite"]) == (at(1), at(2), None)
        with pytest.raises(Conflict):
            await store.store_summary("again", start_id=ids[1], end_id=ids[2], message_ids=None, channels=None,
                                      summary_type="work")
        assert (await store.counts())["unsummarized"] == 2 and await store.summary_count() == 1
        assert [t["summary_id"] for t in await store.turns_by_ids(ids)] == [s["id"], s["id"], None, None]
        s2 = await store.store_summary("rest", start_id=ids[2], end_id=ids[3], message_ids=None, channels=["x"],
                                       summary_type="work", created_at="2025-02-03T04:05:06.789Z")
        assert s2["created_at"] == "2025-02-03T04:05:06.789Z" != s["created_at"]  # a restore keeps when it was written
        assert [r["id"] for r in await store.recent_summaries(5)] == [s2["id"], s["id"]]
        assert (await store.summaries_by_ids([s2["id"]]))[0]["created_at"] == "2025-02-03T04:05:06.789Z"
        assert {r["id"] for r in await store.summaries_by_ids([s["id"], s2["id"]])} == {s["id"], s2["id"]}
        stats = await store.summary_stats()
        assert (stats["summary_count"], stats["unsummarized_count"], stats["total_messages"]) == (2, 0, 4)
        count, sums, raw = await store.context(100, 50)  # no turn unsummarized: two summaries of ~50 turns
        assert count == 0 and [r["id"] for r in sums] == [s["id"], s2["id"]] and raw == []
        # a turn backfilled inside the first summary's span flags it
        acks, _ = await store.store([turn("late", at="2026-01-26T10:01:30.000Z")])
        assert acks[0]["inside_summaries"] == [s["id"]]
        assert await store.needs_rewrite() == [{"id": s["id"], "reason": "backfill"}]

    async def test_a_poll_reads_other_channels_once(self, store: TurnStore) -> None:
        await store.store([turn("before", at=at(1))])
        first = await store.poll("reader", "mine", 10)
        assert first["new_consumer"] and first["turns"] == []
        await store.store([turn(f"o{m}", at=at(m), channel="other") for m in (2, 3, 4)] + [turn("own", at=at(5),
                                                                                               channel="mine")])
        page = await store.poll("reader", "mine", 2)
        assert [t["content"] for t in page["turns"]] == ["o2", "o3"] and page["unread_total"] == 3
        assert page["remaining"] == 1
        rest = await store.poll("reader", "mine", 10)
        assert [t["content"] for t in rest["turns"]] == ["o4"]
        assert (await store.poll("reader", "mine", 10))["turns"] == []
        await store.store([turn(f"p{m}", at=at(m), channel="other") for m in (6, 7, 8)])
        preview = await store.poll("reader", "mine", 2, newest_first_preview=True)
        assert [t["content"] for t in preview["turns"]] == ["p7", "p8"] and preview["oldest_unread_at"] == at(6)
        assert (await store.poll("reader", "mine", 10))["turns"] == []  # the preview marked all read

    async def test_forgetting_deletes_flags_and_logs_without_content(self, store: TurnStore) -> None:
        _acks, new = await store.store([turn("keep the garden", at=at(1), message_id="m-keep"),
                                        turn("zebrapassword secret garden", at=at(2), message_id="m-gone")])
        ids = [t["id"] for t in new]
        s = await store.store_summary("both", start_id=None, end_id=None, message_ids=ids, channels=None,
                                      summary_type="work")
        await store.write_turn_vectors("m", new, [unit(1, 0), unit(0, 1)])
        out = await store.forget([ids[1], 999_999], "tester", "ids")
        assert out == {"forgotten": [ids[1]], "not_found": [999_999], "summaries_removed": [s["id"]],
                       "returned_to_backlog": 1, "owed": None}  # no copy owes it: nothing recorded
        assert [t["id"] for t in await store.turns_by_ids(ids)] == [ids[0]]
        assert await store.lexical_turns(["zebrapassword"], 10) == {}
        sims_ids, _ = await store.turn_similarities("m", _vec(0, 1), 10, 0.0)
        assert ids[1] not in [int(i) for i in sims_ids]
        assert await store.recent_summaries(10) == []  # the summary that quoted it went
        assert [t["id"] for t in (await store.unsummarized_page(10))[1]] == [ids[0]]  # its other turn: backlog
        acks, again = await store.store([turn("zebrapassword secret garden", at=at(2), message_id="m-gone")])
        assert again == [] and acks[0]["forgotten"] is True and acks[0]["id"] is None  # tombstoned
        total, log = await store.forget_log(10)
        assert total == 1 and log[0]["turn_ids"] == [ids[1]] and log[0]["who"] == "tester"
        assert log[0]["how"] == "ids" and log[0]["summaries_removed"] == [s["id"]]
        assert "zebrapassword" not in repr(log) and "m-gone" not in repr(log)

    async def test_a_forget_owed_by_copies_is_kept_until_each_confirms(self, store: TurnStore) -> None:
        _acks, new = await store.store([turn("owedcanary one", at=at(1), message_id="m-1"),
                                        turn("kept", at=at(2)), turn("owedcanary two", at=at(3))])
        ids = [t["id"] for t in new]
        out = await store.forget([ids[2], ids[0], 999_999], "ana", "ids", owed=["g/graph", "r/recap"])
        assert out["forgotten"] == [ids[0], ids[2]] and isinstance(out["owed"], int)
        assert await store.forget([999_998], "ana", "ids", owed=["g/graph"]) == {
            "forgotten": [], "not_found": [999_998], "summaries_removed": [], "returned_to_backlog": 0,
            "owed": None}  # nothing found: nothing owed
        owed = await store.owed_forgets(texts=True)
        assert [(o["id"], o["who"], o["turn_ids"], o["message_ids"], o["texts"], o["copies"]) for o in owed] == [
            (out["owed"], "ana", [ids[0], ids[2]], ["m-1"], ["owedcanary one", "owedcanary two"],
             ["g/graph", "r/recap"])]
        assert owed[0]["forgotten_at"]
        listed = await store.owed_forgets()
        assert "texts" not in listed[0] and "owedcanary" not in repr(listed)
        assert await store.settle_forget(out["owed"], ["r/recap"]) == ["g/graph"]
        assert await store.settle_forget(out["owed"], []) == ["g/graph"]
        assert [o["copies"] for o in await store.owed_forgets()] == [["g/graph"]]
        assert await store.settle_forget(out["owed"], ["g/graph"]) == []
        assert await store.owed_forgets() == []  # the texts went with the last copy
        assert await store.settle_forget(out["owed"], ["g/graph"]) == []  # unknown now: nothing owed
        assert [t["id"] for t in await store.turns_by_ids(ids)] == [ids[1]]
    async def test_a_turn_is_known_by_what_it_says_whatever_id_it_comes_back_with(self, store: TurnStore) -> None:
        """A turn stored without a message_id (plain ``store_message``) comes back from an export with a derived one
        (``pps:<entity>:<id>``): kept, it is acked as the first and not stored twice; forgotten, it is tombstoned
        by what it is (channel, author, time, content), so no id brings it back (issue 35 item 4)."""
        _acks, new = await store.store([turn("kept words", at=at(1)), turn("zqgone words", at=at(2), author="Ana")])
        kept, gone = new
        again, fresh = await store.store([turn("kept words", at=at(1), message_id=f"pps:lyra:{kept['id']}")])
        assert fresh == [] and again[0]["id"] == kept["id"]
        await store.forget([gone["id"]], "tester", "ids")
        for mid in (None, f"pps:lyra:{gone['id']}", "jsonl:0123"):
            acks, fresh = await store.store([turn("zqgone words", at=at(2), author="Ana", message_id=mid)])
            assert fresh == [] and acks[0]["id"] is None and acks[0]["forgotten"] is True, mid
        acks, fresh = await store.store([turn("zqgone words", at=at(3), author="Ana")])  # said again, later: new
        assert len(fresh) == 1 and acks[0]["id"] == fresh[0]["id"]
        twice, fresh = await store.store([turn("same", at=at(4)), turn("same", at=at(4), message_id="x")])
        assert len(fresh) == 1 and twice[0]["id"] == twice[1]["id"] == fresh[0]["id"]  # one batch: one turn
        assert (await store.counts())["total"] == 3

    async def test_forget_tokens_are_single_use_and_bound_to_their_query(self, store: TurnStore) -> None:
        await store.save_forget_token("tok", "q1", [3, 4], expires_at=200.0, now=100.0)
        assert await store.take_forget_token("tok", "q2", now=101.0) is None  # another query
        assert await store.take_forget_token("tok", "q1", now=101.0) == [3, 4]
        assert await store.take_forget_token("tok", "q1", now=102.0) is None  # used up
        await store.save_forget_token("old", "q1", [5], expires_at=150.0, now=100.0)
        assert await store.take_forget_token("old", "q1", now=151.0) is None  # expired

    async def test_lexical_candidates_rank_by_their_words(self, store: TurnStore) -> None:
        _acks, new = await store.store([turn("the violin lesson", at=at(1), channel="a"),
                                        turn("violin violin practice", at=at(2), channel="b"),
                                        turn("garden", at=at(3), channel="a")])
        scores = await store.lexical_turns(["violin"], 10)
        assert set(scores) == {new[0]["id"], new[1]["id"]} and all(v > 0 for v in scores.values())
        assert set(await store.lexical_turns(["violin"], 10, "a")) == {new[0]["id"]}
        await store.store_summary("violin lessons all week", start_id=None, end_id=None,
                                  message_ids=[new[0]["id"]], channels=None, summary_type="work")
        found = await store.lexical_summaries("violin lessons", 5)
        assert [s["summary_text"] for s in found] == ["violin lessons all week"] and found[0]["score"] > 0

    async def test_vectors_are_kept_found_and_dropped(self, store: TurnStore) -> None:
        _acks, new = await store.store([turn(f"t{m}", at=at(m)) for m in (1, 2, 3)])
        todo, _top = await store.turns_missing_vectors("m", 10, 0)
        assert [t["id"] for t in todo] == [t["id"] for t in new]
        await store.write_turn_vectors("m", new[:2], [unit(1, 0), unit(0, 1)])
        assert await store.count_turns_missing_vectors("m") == 1
        assert [t["id"] for t in (await store.turns_missing_vectors("m", 10, 0))[0]] == [new[2]["id"]]
        ids, cos = await store.turn_similarities("m", _vec(1, 0), 1, 0.0)
        best = max(zip(ids, cos, strict=True), key=lambda p: p[1])
        assert int(best[0]) == new[0]["id"] and abs(float(best[1]) - 1.0) < 1e-5
        assert await store.drop_turn_vectors() == 2 and await store.count_turns_missing_vectors("m") == 3
        s = await store.store_summary("s", start_id=None, end_id=None, message_ids=[new[0]["id"]], channels=None,
                                      summary_type="work")
        assert (await store.summaries_missing_vectors("m", 10, 0))[0] == [(s["id"], "s")]
        await store.write_summary_vectors("m", [s["id"]], [unit(0, 1)])
        assert await store.count_summaries_missing_vectors("m") == 0
        assert abs((await store.summary_similarities("m", _vec(0, 1), 5))[s["id"]] - 1.0) < 1e-5
        assert await store.drop_summary_vectors() == 1

    async def test_a_turns_neighbours_are_those_of_its_own_channel(self, store: TurnStore) -> None:
        """Issue 26: a conversation interleaved with another channel keeps its neighbours, for the neighbour
        signal (``channel_neighbours``) and for the context vectors (``turn_similarities``); turns of the other
        channel stored between them are nobody's neighbour here."""
        import numpy as np

        chans = ["a", "b", "a", "b", "b", "a"]  # a1 b1 a2 b2 b3 a3
        _acks, new = await store.store([turn(f"t{k}", at=at(k + 1), channel=c) for k, c in enumerate(chans)])
        ids = [t["id"] for t in new]
        a1, b1, a2, b2, b3, a3 = ids
        pairs = set(await store.channel_neighbours([a1, a2, b2], 16))
        assert {(a1, a2), (a1, a3), (a2, a1), (a2, a3), (b2, b1), (b2, b3)} <= pairs
        assert not {p for p in pairs if {p[0], p[1]} & {a1, a2, a3} and {p[0], p[1]} & {b1, b2, b3}}
        assert set(await store.channel_neighbours([a1], 1)) == set()  # a2 is two ids away
        # context vectors: a1 holds (1, 0), its neighbour in channel a holds (0, 1); the b turns between hold (0, -1)
        await store.write_turn_vectors("m", new, [unit(1, 0), unit(0, -1), unit(0, 1), unit(0, -1), unit(0, -1),
                                                  unit(1, 0)])
        got, cos = await store.turn_similarities("m", _vec(0, 1), 6, 0.5)
        score = dict(zip((int(i) for i in got), (float(c) for c in cos), strict=True))
        expected = float(np.dot([1, 0.5], [0, 1]) / np.linalg.norm([1, 0.5]))  # a1 + 0.5 a2, not a1 + 0.5 b1
        assert abs(score[a1] - expected) < 1e-4, score

    async def test_dense_candidates_rank_as_the_exact_context_scores(self, store: TurnStore) -> None:
        """However a store finds its dense candidates (a matrix, an index file, an index in the database), its best
        ten by context vector are the exact ones (:class:`pps_turns.vectors.TurnVectors`) on a small history."""
        import numpy as np

        from .vectors import TurnVectors

        rng = np.random.default_rng(5)
        chans = ["terminal:a", "discord:b", "email"]
        _acks, new = await store.store([turn(f"t{k}", at=at(k % 60, 1 + k // 60), channel=chans[k % 5 % 3])
                                        for k in range(240)])
        vecs = rng.normal(size=(len(new), 24)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        await store.write_turn_vectors("m", new, [v.tobytes() for v in vecs])
        exact = TurnVectors("m")
        exact.add([t["id"] for t in new], [t["channel"] for t in new], [v.tobytes() for v in vecs])
        for q in range(5):
            qvec = vecs[q * 37] + 0.5 * rng.normal(size=24).astype(np.float32)
            qvec = (qvec / np.linalg.norm(qvec)).astype(np.float32)
            for context in (0.0, 0.3):
                want_ids, want_cos = exact.scores(qvec, context)
                want = [int(want_ids[k]) for k in np.argsort(-want_cos, kind="stable")[:10]]
                # 30 candidates for the best 10 (the retriever asks 200): a turn can be near by its context alone,
                # its own vector and its channel neighbours' each a little further than the best 20
                ids, cos = await store.turn_similarities("m", qvec, 30, context)
                got = dict(zip((int(i) for i in ids), (float(c) for c in cos), strict=True))
                assert sorted(got, key=lambda i: -got[i])[:10] == want, (q, context)
                for k in np.argsort(-want_cos)[:10]:
                    assert abs(got[int(want_ids[k])] - float(want_cos[k])) < 1e-4

    async def test_a_channels_own_best_by_meaning_are_drawn_however_far_down_the_whole_history(
            self, store: TurnStore) -> None:
        """Issue 26: a conversation's turns can all lie below the best few hundred of a long history by meaning;
        ``channel_similarities`` gives each asked channel's own ``n`` best by context vector, scored exactly as
        ``turn_similarities`` scores them (:class:`pps_turns.vectors.TurnVectors`), and nothing of another
        channel."""
        import numpy as np

        from .vectors import TurnVectors

        rng = np.random.default_rng(7)
        # a noisy channel whose every turn is nearer the question than any turn of the conversation, and a third
        chans = ["noise"] * 40 + ["conv"] * 12 + ["other"] * 8
        order = rng.permutation(len(chans))  # interleaved: the conversation is one among the others
        _acks, new = await store.store([turn(f"t{k}", at=at(k % 60, 1 + k // 60), channel=chans[j])
                                        for k, j in enumerate(order)])
        qvec = np.zeros(16, dtype=np.float32)
        qvec[0] = 1.0
        vecs = rng.normal(size=(len(new), 16)).astype(np.float32)
        for k, t in enumerate(new):
            vecs[k, 0] = 6.0 if t["channel"] == "noise" else 0.2 * k % 1.5  # noise nearest, conv spread below
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        await store.write_turn_vectors("m", new, [v.tobytes() for v in vecs])
        exact = TurnVectors("m")
        exact.add([t["id"] for t in new], [t["channel"] for t in new], [v.tobytes() for v in vecs])
        channel_of = {t["id"]: t["channel"] for t in new}
        for context in (0.0, 0.3):
            all_ids, all_cos = exact.scores(qvec, context)
            best = {int(i): float(c) for i, c in zip(all_ids, all_cos, strict=True)}
            conv = sorted((i for i in best if channel_of[i] == "conv"), key=lambda i: -best[i])
            noise = [i for i in best if channel_of[i] == "noise"]
            assert min(best[i] for i in noise) > best[conv[0]]  # the whole channel below the global top 40
            ids, cos = await store.channel_similarities("m", qvec, ["conv"], 5, context)
            got = {int(i): float(c) for i, c in zip(ids, cos, strict=True)}
            assert sorted(got, key=lambda i: -got[i]) == conv[:5], context
            assert all(abs(got[i] - best[i]) < 1e-3 for i in got)
            ids, _cos = await store.channel_similarities("m", qvec, ["conv", "other", "nobody"], 3, context)
            per: dict[str, int] = {}
            for i in ids:
                per[channel_of[int(i)]] = per.get(channel_of[int(i)], 0) + 1
            assert per == {"conv": 3, "other": 3}, per
        ids, _cos = await store.channel_similarities("other-model", qvec, ["conv"], 5, 0.0)
        assert len(ids) == 0

    async def test_ingestion_queue(self, store: TurnStore) -> None:
        _acks, new = await store.store([turn("a", at=at(1)), turn("b", at=at(2))])
        assert [t["id"] for t in await store.pending_ingestion(10)] == [t["id"] for t in new]
        assert await store.mark_ingested([new[0]["id"]]) == 1
        assert await store.mark_ingested([new[0]["id"]]) == 0
        assert [t["id"] for t in await store.pending_ingestion(10)] == [new[1]["id"]]


def _vec(*xs: float) -> Any:
    import numpy as np

    return np.frombuffer(unit(*xs), dtype=np.float32)

"""The turn and summary searches, over any :class:`~pps_turns.store.TurnStore`.

Turns: the store's BM25 candidates and its dense candidates (turn vectors, with their neighbours' context),
fused by :mod:`pps_turns.retrieval`. Vectors are computed here, in the background after turns are stored
(capture never waits for the model), and by a search for what is still missing before it looks, up to
:data:`QUERY_EMBED_MAX` turns (read your writes: a turn stored just before, even by a process that closed at
once, is found by meaning; a larger backlog is not waited for and the answer says how many wait). The store keeps them
(``write_turn_vectors``) and searches them (``turn_similarities``).
Summaries: BM25 fused with summary vectors the same way, simpler (summaries are few).
Without an embedder both searches are lexical.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from . import retrieval
from .store import SummaryRow, Turn, TurnStore
from .vectors import EMBED_BATCH, RECIPE, vector_text

log = logging.getLogger("pps.turns")

#: Authors named in questions are re-read this often (this process's own captures reset them at once; another
#: process sharing the store may add authors).
AUTHORS_TTL_S = 30.0
#: Document frequencies of query words (the calibrated score's idf) are counted up to this many turns, and kept
#: this long: a word in more turns than the cap weighs as little as one in exactly the cap.
DF_CAP = 1000
DF_TTL_S = 30.0
DF_CACHE = 20_000

# summary search
BM25_WEIGHT = 0.6
DENSE_WEIGHT = 0.4
#: A summary found by meaning alone must be at least this similar to the question.
DENSE_FLOOR = 0.25
CANDIDATES = 50
SUMMARY_EMBED_BATCH = 32
#: A turn search embeds the turns still without a vector before it looks when they are at most this many; the
#: a larger backlog follows in the background, unwaited, and the answer says how many wait (``vectors_pending``).
QUERY_EMBED_MAX = 32


def _blobs(vecs) -> list[bytes]:
    import numpy as np

    return [np.asarray(v, dtype=np.float32).tobytes() for v in vecs]


class _Embedding:
    """The entity's embedder, looked up lazily; a broken embedder plugin is logged once, never fatal."""

    what = "vectors"

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self._warned = False

    def embedder(self) -> Any:
        try:
            return self.memory.embedder
        except Exception as exc:  # a broken embedder plugin must not break search
            self.warn(exc)
            return None

    def warn(self, exc: BaseException) -> None:
        if not self._warned:
            log.warning("%s unavailable, searching lexically: %s: %s", self.what, type(exc).__name__, exc)
            self._warned = True


class Retriever(_Embedding):
    """The raw_capture search: fused when an embedder is loaded, lexical otherwise."""

    what = "turn vectors"

    def __init__(self, memory: Any, store: TurnStore) -> None:
        super().__init__(memory)
        self.store = store
        self.pending = True  # turns may lack vectors (stored before an embedder, or a failed embed)
        #: Every turn with id <= this has a vector (of the current model) or was looked at. Only for a store this
        #: process alone writes: where several servers write (``exclusive`` False) ids commit out of order and
        #: other processes add turns, so the store answers by set membership, the floor stays 0 and every
        #: search looks at the backlog.
        self.floor = 0
        self.shared = getattr(store, "exclusive", True) is False
        self._task: asyncio.Task | None = None
        self._embedding = asyncio.Lock()  # one batch at a time: the background drain and a search take turns
        #: How many turns had no vector when the last search looked (they were found by their words only);
        #: 0 when every one had, or without an embedder (search is lexical by design then, not incomplete).
        self.vectors_pending = 0
        self._authors: dict[str, str] | None = None
        self._authors_at = 0.0
        self._df: dict[str, int] = {}
        self._df_n = 0
        self._df_at = 0.0

    @staticmethod
    def model(emb: Any) -> str:
        """The model key of turn vectors: the embedder and how a turn becomes text."""
        return f"{emb.name}|{RECIPE}"

    def invalidate(self) -> None:
        """Authors changed (a turn stored or forgotten): read them again at the next search."""
        self._authors = None

    async def weights(self, terms: list[str]) -> retrieval.Weights:
        """The idf of each query word over this entity's turns (counted up to DF_CAP, cached DF_TTL_S)."""
        now = time.monotonic()
        if now - self._df_at > DF_TTL_S or len(self._df) > DF_CACHE:
            self._df, self._df_at = {}, now
        todo = [t for t in terms if t not in self._df]
        if todo or not self._df_n:
            self._df_n, counts = await self.store.term_counts(todo, DF_CAP)
            self._df.update(counts)
        return retrieval.Weights.of(terms, self._df_n, self._df)

    async def authors(self) -> dict[str, str]:
        if self._authors is None or time.monotonic() - self._authors_at > AUTHORS_TTL_S:
            self._authors = retrieval.author_tokens(await self.store.author_names())
            self._authors_at = time.monotonic()
        return self._authors

    async def index(self, new_turns: list[Turn]) -> None:
        """Called after turns are stored: vectors are computed in the background, so capture never waits."""
        self.invalidate()
        if new_turns:
            self.pending = True
            if self.embedder() is not None:  # without one there is nothing to drain: no task per capture
                self._kick()

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.drain())

    async def drain(self, progress: Callable[[int], None] | None = None) -> int:
        """Embed every turn still without a vector, in batches; returns how many were embedded.

        ``progress(done)`` is called after each batch (``pps reindex`` draws its bar with it)."""
        running = self._task
        if running is not None and not running.done() and asyncio.current_task() is not running:
            await asyncio.shield(running)  # one drainer at a time
        emb = self.embedder()
        done = 0
        while emb is not None and self.pending:
            try:
                async with self._embedding:
                    done += await self._batch(emb) if self.pending else 0
                if progress is not None:
                    progress(done)
            except Exception as exc:  # left pending: the next search or store tries again
                self.warn(exc)
                break
        return done

    async def ready(self, emb: Any, limit: int) -> None:
        """Before a search looks: embed up to ``limit`` turns still without a vector (a failure is logged and
        left pending: the search is then lexical for those turns)."""
        done = 0
        try:
            while self.pending and done < limit:
                async with self._embedding:  # a background batch in flight finishes first
                    if self.pending:
                        done += await self._batch(emb, min(EMBED_BATCH, limit - done), wait=True)
        except Exception as exc:
            self.warn(exc)

    async def _embed(self, emb: Any, todo: list[Turn]) -> list[bytes]:
        """The vectors of ``todo`` as stored; a failure leaves the backlog pending."""
        try:
            vecs = await asyncio.to_thread(emb.embed, [vector_text(t) for t in todo])
        except BaseException:
            self.pending = True
            raise
        return _blobs(vecs)

    async def _batch(self, emb: Any, size: int = EMBED_BATCH, wait: bool = False) -> int:
        model = self.model(emb)
        claim = getattr(self.store, "claim_turns_missing_vectors", None)
        if claim is not None:  # a store several servers share: each turn is embedded by one of them
            async with claim(model, size, wait) as (todo, write):
                if len(todo) < size:  # the rest (if any) is another server's, being embedded now
                    self.pending = False
                if todo:
                    await write(await self._embed(emb, todo))
            return len(todo)
        todo, top = await self.store.turns_missing_vectors(model, size, self.floor)
        if len(todo) < size:
            self.pending = False
        if todo:
            await self.store.write_turn_vectors(model, todo, await self._embed(emb, todo))
            if not self.shared:
                self.floor = todo[-1]["id"]  # every turn up to here has its vector
        if len(todo) < size and not self.shared:  # nothing else was missing up to ``top``: start there next
            self.floor = max(self.floor, top)
        return len(todo)

    async def close(self) -> None:
        """Stop the background embedding (what is left is embedded at the next open)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except BaseException:  # cancelled, or a failure already logged
                pass
        self._task = None

    async def reindex(self, progress: Callable[[int, int], None], full: bool) -> dict[str, Any] | None:
        """Embed every turn without a vector (every turn with ``full``), then let the store repair its index."""
        emb = self.embedder()
        if emb is None:
            return {"skipped": "no embedder loaded: turns are searched lexically"}
        model = self.model(emb)
        await self.close()  # a background drain stops; this one takes over
        dropped = await self.store.drop_turn_vectors() if full else 0
        self.floor = 0
        self.pending = True
        total = await self.store.count_turns_missing_vectors(model)
        progress(0, total)
        done = await self.drain(progress=lambda n: progress(min(n, total), total))
        out: dict[str, Any] = {"embedded": done, "missing_after": await self.store.count_turns_missing_vectors(model),
                               "model": model}
        repaired = await self.store.repair_turn_index(model)
        if repaired:
            out.update(repaired)
        if full:
            out["dropped"] = dropped
        return out

    async def search(self, query: str, limit: int, offset: int = 0, channel: str | None = None,
                     cfg: retrieval.FusionConfig = retrieval.DEFAULT, min_score: float | None = None,
                     calibrated: bool = True) -> list[Turn]:
        """Turns best first, each with ``score`` (the calibrated probability that it is relevant, comparable
        across queries and entities) and ``signals`` (``bm25``, ``dense``, ``fused``, ``coverage``, ``matched``,
        ``rare``, ``near``, ``author``, ``time``, ``probability``, ``features``). ``min_score``: only turns scoring
        at least this (the floor; None: no floor). ``calibrated=False`` ranks by the fused score alone, as before
        calibration (bench/locomo.py's "before")."""
        emb = self.embedder() if cfg.use_dense else None
        self.vectors_pending = 0

        async def embedded() -> Any:
            if emb is None:
                return None
            try:
                if self.shared:  # other servers store turns too: their backlog is this search's as well
                    self.pending = True
                if self.pending:  # read your writes: a backlog within the bound is embedded first; a larger
                    # one (an import, a history stored before the embedder) is left to the background, so the
                    # search neither waits for it nor for the batch in flight, and says how many turns wait
                    backlog, _ = await self.store.turns_missing_vectors(self.model(emb), QUERY_EMBED_MAX + 1,
                                                                        self.floor)
                    if not backlog:  # nothing waits: one look, no claim
                        self.pending = False
                    elif len(backlog) <= QUERY_EMBED_MAX:
                        await self.ready(emb, QUERY_EMBED_MAX)
                    if self.pending:
                        self.vectors_pending = await self.store.count_turns_missing_vectors(self.model(emb))
                        self._kick()
                import numpy as np

                return np.asarray((await asyncio.to_thread(emb.embed, [query]))[0], dtype=np.float32)
            except Exception as exc:
                self.warn(exc)
                return None

        async def by_words() -> tuple[retrieval.Query, dict[int, float], retrieval.Weights | None]:
            q = retrieval.parse_query(query, await self.authors(), cfg)
            lexical = (await self.store.lexical_turns(q.terms, cfg.candidates, channel, cfg.lexical_budget)
                       if cfg.use_bm25 and q.terms else {})
            return q, lexical, (await self.weights(q.terms) if calibrated else None)

        async def by_meaning() -> tuple[Any, Any]:
            qvec = await embedded()
            if qvec is None:
                return None, None
            assert emb is not None
            return qvec, await self.store.turn_similarities(self.model(emb), qvec, cfg.candidates, cfg.context, channel)

        # the question's vector (a model run) and its nearest turns, and everything read by its words, do not wait
        # for each other (a store that reads on several connections or threads reads both at once)
        (qvec, scores), (q, lexical, weights) = await asyncio.gather(by_meaning(), by_words())
        dense: dict[int, float] = {}
        floor = 0.0
        if qvec is not None:
            dense, floor = retrieval.dense_top(scores, cfg.candidates, cfg.dense_floor_rank)
        ids = sorted(set(lexical) | set(dense))
        if not ids:
            return []
        neighbours = getattr(self.store, "channel_neighbours", None)
        want_links = bool(cfg.neighbour and neighbours is not None)  # each turn's neighbours in its own channel
        rows, pairs = await asyncio.gather(self.store.turns_by_ids(ids),
                                           neighbours(ids, retrieval.NEIGHBOUR_REACH) if want_links
                                           else _nothing())
        found = {t["id"]: t for t in rows}
        meta = {i: _meta(t) for i, t in found.items()}
        links = retrieval.links_from_rows(ids, pairs) if want_links else None
        ranked = retrieval.fuse_meta(meta, q, lexical, dense, floor, cfg, channel, links)
        by_channel = getattr(self.store, "channel_similarities", None)
        # no second pass while the store has no usable vectors (a large history waiting for its index): the
        # search is lexical until the first pass has dense candidates, and both passes see the same index
        chosen = (retrieval.channels_to_search(ranked, meta, cfg, channel)
                  if qvec is not None and dense and by_channel is not None else [])
        if chosen:  # second pass: the chosen channels' own best turns by meaning join the dense candidates, and
            # their dense scores are scaled within the channel, as when the conversation is alone in its store
            assert by_channel is not None
            more_ids, more_cos = await by_channel(self.model(emb), qvec, chosen, cfg.channel_candidates, cfg.context)
            more, _f = retrieval.dense_top((more_ids, more_cos), len(more_ids), 1)
            fresh = sorted(i for i in more if i not in found)
            dense = {**more, **dense}
            if fresh:
                rows, pairs2 = await asyncio.gather(self.store.turns_by_ids(fresh),
                                                    neighbours(fresh, retrieval.NEIGHBOUR_REACH) if want_links
                                                    else _nothing())
                found.update((t["id"], t) for t in rows)
                meta.update((t["id"], _meta(t)) for t in rows)
                ids = sorted({*ids, *fresh})
                links = retrieval.links_from_rows(ids, [*pairs, *pairs2]) if want_links else None
            ranked = retrieval.fuse_meta(meta, q, lexical, dense, floor, cfg, channel, links,
                                         retrieval.channel_scales(more, meta, chosen, cfg) if cfg.channel_scale
                                         else None)
        if calibrated:
            assert weights is not None
            ranked = retrieval.calibrate(ranked, {i: t["content"] for i, t in found.items()}, q.terms, weights,
                                         dense_on=qvec is not None, dense=dense, lexical_on=cfg.use_bm25)
        if min_score is not None:
            ranked = [r for r in ranked if r[1] >= min_score]
        return [{**found[i], "score": round(s, 6), "signals": sig} for i, s, sig in ranked[offset:offset + limit]
                if i in found]

    async def lexical_baseline(self, query: str, limit: int) -> list[Turn]:
        """Plain BM25 over the question's words, nothing else (what the fused search is measured against)."""
        from pps_core.textsearch import content_terms

        scores = await self.store.lexical_turns(content_terms(query)[:64], limit)
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        found = {t["id"]: t for t in await self.store.turns_by_ids([i for i, _s in ranked])}
        return [{**found[i], "score": round(s, 6)} for i, s in ranked if i in found]


async def _nothing() -> list[Any]:
    return []


def _meta(t: Turn) -> tuple[str, str, str, tuple[str, str]]:
    """What ``retrieval.fuse_meta`` reads of a turn: author, time, channel, episode (session, else channel and day)."""
    return t["author_name"], t["created_at"], t["channel"], (t["channel"], t["session_id"] or t["created_at"][:10])


class SummarySearch(_Embedding):
    """Summary search: BM25 fused with summary vectors when an embedder is loaded, BM25 alone otherwise."""

    what = "summary vectors"

    def __init__(self, memory: Any, store: TurnStore,
                 weights: Callable[[list[str]], Any] | None = None) -> None:
        super().__init__(memory)
        self.store = store
        #: ``await weights(terms)``: the query words' idf over the entity's turns (the Retriever's)
        self.weights = weights
        #: (model, every summary up to this id has its vector or was looked at); not used where several servers
        #: write (summary ids commit out of order as turn ids do): the store's set of missing vectors is read
        self.floor: tuple[str, int] = ("", 0)
        self.shared = getattr(store, "exclusive", True) is False

    @staticmethod
    def model(emb: Any) -> str:
        return f"{emb.name}|summary"

    async def _fill(self, emb: Any, model: str, progress: Callable[[int], None] | None = None) -> int:
        done = 0
        while True:
            after = self.floor[1] if self.floor[0] == model and not self.shared else 0
            todo, top = await self.store.summaries_missing_vectors(model, SUMMARY_EMBED_BATCH, after)
            if not todo:
                self.floor = (model, max(after, top))
                return done
            vecs = await asyncio.to_thread(emb.embed, [text for _i, text in todo])
            await self.store.write_summary_vectors(model, [i for i, _t in todo], _blobs(vecs))
            self.floor = (model, todo[-1][0])
            done += len(todo)
            if progress is not None:
                progress(done)

    async def search(self, query: str, limit: int, offset: int = 0,
                     min_score: float | None = None) -> list[SummaryRow]:
        """Summaries best first, each with ``score`` (the calibrated probability of relevance, the plain models
        of :data:`pps_turns.retrieval.CALIBRATION`) and ``signals``; ``min_score``: the floor (None: none)."""
        from pps_core.textsearch import content_terms

        lexical = await self.store.lexical_summaries(query, CANDIDATES)
        emb = self.embedder()
        dense: dict[int, float] = {}
        if emb is not None:
            try:
                import numpy as np

                model = self.model(emb)
                await self._fill(emb, model)
                qvec = np.asarray((await asyncio.to_thread(emb.embed, [query]))[0], dtype=np.float32)
                dense = await self.store.summary_similarities(model, qvec, CANDIDATES)
            except Exception as exc:
                self.warn(exc)
                dense = {}
        terms = content_terms(query)[:64]
        weights = (await self.weights(terms) if self.weights is not None
                   else retrieval.Weights.of(terms, 1, {}))
        rows = await fuse_summaries(lexical, dense, CANDIDATES, 0, self.store.summaries_by_ids)
        model = retrieval.CALIBRATION["plain_dense" if emb is not None and dense else "plain"]
        rarest = weights.rarest
        for s in rows:
            matched = retrieval.matched_terms(terms, s["summary_text"])
            x = {"coverage": weights.coverage(matched), "rare": float(rarest is not None and rarest in matched),
                 "dense": s["signals"].get("dense") or 0.0}
            p = model(x)
            s["score"] = round(p, 6)
            s["signals"] = {**s["signals"], "coverage": round(x["coverage"], 4), "matched": matched,
                            "rare": bool(x["rare"]), "probability": round(p, 4),
                            "features": {k: round(v, 4) for k, v in x.items() if k in model.features}}
        rows.sort(key=lambda s: (-s["score"], -(s["signals"].get("fused") or 0.0), s["id"]))
        if min_score is not None:
            rows = [s for s in rows if s["score"] >= min_score]
        return rows[offset:offset + limit]

    async def reindex(self, progress: Callable[[int, int], None], full: bool) -> dict[str, Any] | None:
        emb = self.embedder()
        if emb is None:
            return {"skipped": "no embedder loaded: summaries are searched lexically"}
        model = self.model(emb)
        dropped = await self.store.drop_summary_vectors() if full else 0
        self.floor = ("", 0)
        total = await self.store.count_summaries_missing_vectors(model)
        progress(0, total)
        done = await self._fill(emb, model, lambda n: progress(min(n, total), total))
        out: dict[str, Any] = {"embedded": done, "model": model}
        if full:
            out["dropped"] = dropped
        return out


async def fuse_summaries(lexical: list[SummaryRow], dense: dict[int, float], limit: int, offset: int,
                         by_ids: Any) -> list[SummaryRow]:
    """BM25 candidates (with ``score``) and summary cosines, fused; ``await by_ids(ids)`` fetches dense-only hits."""
    if not dense:
        for s in lexical:
            s["signals"] = {"bm25": s["score"], "dense": None, "fused": s["score"]}
        return lexical[offset:offset + limit]
    best_bm25 = max((s["score"] for s in lexical), default=0.0) or 1.0
    fused: dict[int, float] = {}
    signals: dict[int, dict[str, float | None]] = {}
    for s in lexical:
        fused[s["id"]] = BM25_WEIGHT * s["score"] / best_bm25
        signals[s["id"]] = {"bm25": s["score"], "dense": dense.get(s["id"])}
    for sid, sim in dense.items():
        if sid not in fused and sim < DENSE_FLOOR:
            continue
        fused[sid] = fused.get(sid, 0.0) + DENSE_WEIGHT * max(0.0, sim)
        signals.setdefault(sid, {"bm25": None, "dense": sim})["dense"] = sim
    ranked = sorted(fused, key=lambda i: -fused[i])[offset:offset + limit]
    rows = {s["id"]: s for s in lexical}
    missing = [i for i in ranked if i not in rows]
    if missing:
        for s in await by_ids(missing):
            rows[s["id"]] = s
    out = []
    for sid in ranked:
        if sid not in rows:  # forgotten meanwhile
            continue
        s = dict(rows[sid])
        s["score"] = round(fused[sid], 6)
        s["signals"] = {**signals[sid], "fused": s["score"]}
        out.append(s)
    return out

"""The turn domain of one entity: a store, its searches, its two layers and every turn operation, as one object.

A store adapter's plugin builds it (:func:`pps_turns.build`) and returns its layers from ``pps_layers`` and its
operations from ``pps_operations``. Operations are methods of :class:`TurnDomain`: none looks a layer up by name
and none reaches into another object's storage; the layers call the same methods (no layer calls an operation
through the catalog).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
import time as _time
from bisect import bisect_right
from collections.abc import Awaitable, Callable
from datetime import datetime, time, timedelta
from typing import Any

from pps_core import Operation, hookimpl
from pps_core.errors import InvalidParams, NotFound, Unavailable
from pps_core.lineage import ForgottenTurns
from pps_core.models import Summary
from pps_core.privacy import drop_private
from pps_core.timeutil import now_utc, parse_timestamp, render_iso_local, to_storage

from . import retrieval
from .layers import RawCaptureLayer, SummariesLayer
from .params import (
    ActivityParams,
    ConversationContextParams,
    ForgetLogParams,
    ForgetRangeParams,
    ForgetSearchParams,
    ForgetTurnsParams,
    LimitParams,
    ListTurnsParams,
    NoParams,
    PollParams,
    SearchParams,
    StoreMessagesParams,
    StoreSummaryParams,
    SummarizeParams,
    TurnIn,
    TurnsAroundParams,
    TurnsSinceParams,
    TurnsSinceSummaryParams,
)
from .retriever import Retriever, SummarySearch
from .store import BrowsableTurnStore, TurnStore

TURNS_PER_SUMMARY = 50
#: What a forget answers while a copy still owes it.
OWED_NOTE = ("The turns are deleted from the turn store. The copies named in pending could not forget them now "
             "and still hold their text; each is owed: it is retried when the entity opens, by upkeep and at the "
             "next forget until it confirms (turn_copies and pps_health list what is owed).")
#: How long a forget_search confirmation token stays valid.
TOKEN_TTL_S = 600.0


class TurnPlugin:
    """A store adapter's object for one entity (``pps_entity_plugin``): at each open it builds the entity's
    :class:`TurnDomain` over a new store (``store(memory)``), returns its layers, and runs every turn operation on
    it. The adapter's plugin module is one hook::

        @hookimpl
        def pps_entity_plugin(memory):
            return pps_turns.TurnPlugin(memory, MyStore.for_memory)
    """

    def __init__(self, memory: Any, store: Callable[[Any], TurnStore]) -> None:
        self.memory = memory
        self._store = store
        #: The domain of the layers this object built (None until the entity's layers are built).
        self.domain: TurnDomain | None = None

    @hookimpl
    def pps_layers(self) -> list[Any]:
        self.domain = TurnDomain(self.memory, self._store(self.memory))
        return self.domain.layers()

    @hookimpl
    def pps_operations(self) -> list[Operation]:
        return operations(self._domain)

    def _domain(self, memory: Any) -> TurnDomain:
        if self.domain is None:
            raise Unavailable("the turn layers of this entity are not built (its memory is not open)")
        return self.domain


class TurnDomain:
    """Turns, summaries, navigation, channels and forgetting over one :class:`~pps_turns.store.TurnStore`."""

    def __init__(self, memory: Any, store: TurnStore) -> None:
        self.memory = memory
        self.store = store
        self.retriever = Retriever(memory, store)
        self.summary_search = SummarySearch(memory, store, self.retriever.weights)
        self.raw = RawCaptureLayer(self)
        self.summaries = SummariesLayer(self)
        #: One settling of owed forgets at a time (the retry at open, upkeep, a forget).
        self._settling = asyncio.Lock()

    def layers(self) -> list[Any]:
        return [self.raw, self.summaries]

    def _open_store(self) -> TurnStore:
        if not self.raw.opened:
            raise Unavailable(f"layer raw_capture is not available for entity {self.memory.settings.entity!r}: "
                              f"its store did not open ({self.store.detail})")
        return self.store

    # -- shapes of answers ------------------------------------------------------------------------

    def _out(self, t: dict[str, Any]) -> dict[str, Any]:
        t = dict(t)
        t["local_time"] = render_iso_local(t["created_at"], self.memory.tz)
        return t

    def _sum_out(self, s: dict[str, Any]) -> dict[str, Any]:
        s = dict(s)
        for key in ("time_span_start", "time_span_end"):
            if s.get(key):
                s[key + "_local"] = render_iso_local(s[key], self.memory.tz)
        return s

    def _prepare(self, turn: TurnIn, where: str) -> dict[str, Any]:
        limit = self.memory.settings.limits.max_content_chars
        if len(turn.content) > limit:
            raise InvalidParams(f"{where}content: {len(turn.content)} characters, the limit is {limit}",
                                param=f"{where}content")
        created = (to_storage(parse_timestamp(turn.created_at, self.memory.tz, f"{where}created_at"))
                   if turn.created_at else to_storage(now_utc()))
        return {**turn.model_dump(), "content": drop_private(turn.content), "created_at": created}

    def _time(self, value: str | None, param: str) -> str | None:
        return to_storage(parse_timestamp(value, self.memory.tz, param)) if value else None

    # -- capture ----------------------------------------------------------------------------------

    async def capture(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Store prepared turns; vectors follow in the background; ``message_stored`` fires for each new one."""
        from pps_core import Message

        acks, new = await self._open_store().store(batch)
        await self.retriever.index(new)
        for t in new:
            self.memory.events.message_stored(Message(**t))
        return acks

    async def store_message(self, p: TurnIn) -> dict[str, Any]:
        acks = await self.capture([self._prepare(p, "")])
        return {"stored": acks[0]["id"] is not None, **acks[0]}

    async def store_messages(self, p: StoreMessagesParams) -> dict[str, Any]:
        if len(p.messages) > self.memory.settings.limits.max_batch:
            raise InvalidParams(f"messages: at most {self.memory.settings.limits.max_batch} turns per call",
                                param="messages")
        batch = [self._prepare(t, f"messages.{i}.") for i, t in enumerate(p.messages)]
        acks = await self.capture(batch)
        out = {"stored": sum(1 for a in acks if a["id"] is not None), "ids": [a["id"] for a in acks], "acks": acks}
        forgotten = sum(1 for a in acks if a.get("forgotten"))
        if forgotten:
            out["forgotten"] = forgotten  # message ids that were forgotten: never stored again
        return out

    def floor(self, layer: Any, given: float | None) -> float:
        """The floor of a search: the call's ``min_score``, else ``[recall] min_score`` of the layer, else the
        layer's default (its ``min_recall_score``)."""
        if given is not None:
            return given
        configured = self.memory.settings.recall.min_score.get(layer.name)
        return float(configured if configured is not None else layer.min_recall_score or 0.0)

    @staticmethod
    def _nothing(results: list[Any], floor: float, what: str) -> dict[str, str]:
        if results:
            return {}
        return {"note": f"nothing found: no {what} scored at least the floor ({floor:g}, the calibrated "
                        f"probability that it is relevant); min_score=0 lists the nearest anyway"}

    async def raw_search(self, p: SearchParams) -> dict[str, Any]:
        self._open_store()
        floor = self.floor(self.raw, p.min_score)
        results = await self.memory.search_layer(self.raw.name, p.query, p.limit, p.offset, channel=p.channel,
                                                 min_score=floor)
        out: dict[str, Any] = {"query": p.query, "count": len(results), "offset": p.offset, "min_score": floor,
                               **self._nothing(results, floor, "turn")}
        pending = self.retriever.vectors_pending
        if pending:  # found by their words only, not by meaning yet
            out["vectors_pending"] = pending
            said = (f"{pending} turns have no vector yet, so this search found them by their words only; they are "
                    f"embedded in the background and by each search, or all at once with `pps reindex`")
            out["note"] = f"{out['note']}; {said}" if "note" in out else said
        return {**out, "results": [self._hit(r, p.explain) for r in results]}

    def _hit(self, r: Any, explain: bool) -> dict[str, Any]:
        """A search hit: its id, content, author, channel, time, one score (the calibrated probability) and how it
        matched (``match``: strong, words, meaning or weak: retrieval.match_label); the
        caller's own metadata when it has some; the other fields and the signals of the score with ``explain``."""
        hit: dict[str, Any] = {"id": int(r.source), "content": r.content, "author_name": r.metadata.get("author_name"),
                               "channel": r.metadata.get("channel"), "created_at": r.timestamp, "score": r.score}
        if r.signals and r.signals.get("match"):  # how it matched, in a word: the score alone reads as a percentage
            hit["match"] = r.signals["match"]
        own = r.metadata.get("metadata") or {}
        if own or explain:
            hit["metadata"] = own
        if explain:
            hit.update(session_id=r.metadata.get("session_id"), message_id=r.metadata.get("message_id"),
                       summary_id=r.metadata.get("summary_id"),
                       local_time=render_iso_local(r.timestamp, self.memory.tz), scores=r.signals)
        return hit

    async def poll_channels(self, p: PollParams) -> dict[str, Any]:
        found = await self._open_store().poll(p.consumer_key, p.channel, p.limit)
        found["turns"] = [self._out(t) for t in found["turns"]]
        return found

    # -- summaries --------------------------------------------------------------------------------

    async def summarize_batch(self, limit: int) -> dict[str, Any]:
        total, batch = await self._open_store().unsummarized_page(limit, oldest_first=True)
        ids = [t["id"] for t in batch]
        tz = self.memory.tz
        lines = [f"[{render_iso_local(t['created_at'], tz)}] [{t['channel']}] {t['author_name']}: {t['content']}"
                 for t in batch]
        return {
            "count": len(batch), "unsummarized_count": total,
            # in time order, so the ids need not be contiguous: store with message_ids (start/end only bound them)
            "start_id": min(ids) if ids else None, "end_id": max(ids) if ids else None, "message_ids": ids,
            "channels": sorted({t["channel"] for t in batch}),
            "messages": [self._out(t) for t in batch],
            "transcript": "\n".join(lines),
            "instructions": ("Summarize these turns faithfully: keep who said what (use the author names as given), "
                             "add nothing they do not say. Then call store_summary with summary_text and "
                             "message_ids (exactly these ids)."),
        }

    async def summarize_messages(self, p: SummarizeParams) -> dict[str, Any]:
        return await self.summarize_batch(p.limit)

    async def save_summary(self, text: str, *, start_id: int | None = None, end_id: int | None = None,
                           message_ids: list[int] | None = None, channels: list[str] | None = None,
                           summary_type: str = "work", created_at: str | None = None) -> dict[str, Any]:
        written = to_storage(parse_timestamp(created_at, self.memory.tz, "created_at")) if created_at else None
        stored = await self._open_store().store_summary(text, start_id=start_id, end_id=end_id,
                                                        message_ids=message_ids, channels=channels,
                                                        summary_type=summary_type, created_at=written)
        self.memory.events.summary_stored(Summary(**{k: stored[k] for k in Summary.model_fields}))
        return stored

    async def store_summary(self, p: StoreSummaryParams) -> dict[str, Any]:
        stored = await self.save_summary(p.summary_text, start_id=p.start_id, end_id=p.end_id,
                                         message_ids=p.message_ids, channels=p.channels, summary_type=p.summary_type,
                                         created_at=p.created_at)
        return self._sum_out(stored)

    async def get_recent_summaries(self, p: LimitParams) -> dict[str, Any]:
        found = await self._open_store().recent_summaries(p.limit, p.offset)
        return {"count": len(found), "summaries": [self._sum_out(s) for s in found]}

    async def search_summaries(self, p: SearchParams) -> dict[str, Any]:
        self._open_store()
        floor = self.floor(self.summaries, p.min_score)
        results = await self.memory.search_layer(self.summaries.name, p.query, p.limit, p.offset, min_score=floor)
        return {"query": p.query, "count": len(results), "min_score": floor,
                **self._nothing(results, floor, "summary"),
                "results": [{"id": int(r.source.split()[-1]), "summary_text": r.content, "score": r.score,
                             "time_span_end": r.timestamp, **r.metadata,
                             **({"scores": r.signals} if p.explain else {})} for r in results]}

    async def summary_stats(self, _p: NoParams) -> dict[str, Any]:
        return await self._open_store().summary_stats()

    # -- navigation (reference/001) ---------------------------------------------------------------

    async def get_turns_since_summary(self, p: TurnsSinceSummaryParams) -> dict[str, Any]:
        total, page = await self._open_store().unsummarized_page(p.limit, p.offset, oldest_first=p.oldest_first,
                                                                 channel=p.channel)
        nxt = p.offset + len(page)
        return {"total_unsummarized": total, "offset": p.offset, "limit": p.limit, "count": len(page),
                "order": "oldest_first" if p.oldest_first else "newest_first (each page chronological)",
                "next_offset": nxt if nxt < total else None, "turns": [self._out(t) for t in page]}

    async def get_conversation_context(self, p: ConversationContextParams) -> dict[str, Any]:
        empty = {"unsummarized_count": 0, "summaries_count": 0, "raw_turns_count": 0, "turns_covered_approx": 0,
                 "summaries": [], "raw_turns": []}
        count, sums, raw = await self._open_store().context(p.turns, TURNS_PER_SUMMARY)
        if p.turns == 0:
            return {**empty, "unsummarized_count": count}
        covered = len(raw) + sum(s["message_count"] for s in sums)
        return {"unsummarized_count": count, "summaries_count": len(sums), "raw_turns_count": len(raw),
                "turns_covered_approx": covered, "summaries": [self._sum_out(s) for s in sums],
                "raw_turns": [self._out(t) for t in raw]}

    async def get_turns_since(self, p: TurnsSinceParams) -> dict[str, Any]:
        ts = to_storage(parse_timestamp(p.timestamp, self.memory.tz, "timestamp"))
        msgs, more, sums = await self._open_store().since(ts, p.limit, p.include_summaries)
        return {"timestamp_start": p.timestamp, "timestamp_start_utc": ts, "messages_count": len(msgs),
                "summaries_count": len(sums), "truncated": more, "limit": p.limit,
                "messages": [self._out(t) for t in msgs], "summaries": [self._sum_out(s) for s in sums]}

    async def get_turns_around(self, p: TurnsAroundParams) -> dict[str, Any]:
        if math.isnan(p.before_ratio):
            raise InvalidParams("before_ratio: must be a number between 0 and 1", param="before_ratio")
        ts = to_storage(parse_timestamp(p.timestamp, self.memory.tz, "timestamp"))
        ratio = min(1.0, max(0.0, p.before_ratio))
        before_n = int(p.count * ratio)
        before, after = await self._open_store().around(ts, before_n, p.count - before_n)
        msgs = before + after
        return {"center_timestamp": p.timestamp, "center_timestamp_utc": ts, "before_ratio": ratio,
                "before_count": len(before), "after_count": len(after), "total_count": len(msgs),
                "messages": [self._out(t) for t in msgs]}

    # -- browsing (the explorer's timeline and plots) -----------------------------------------------

    def _browsable(self) -> BrowsableTurnStore:
        store = self._open_store()
        if not isinstance(store, BrowsableTurnStore):
            raise Unavailable(f"browsing turns needs a store with list_turns and activity "
                              f"(pps_turns.BrowsableTurnStore); {type(store).__name__} has none")
        return store

    async def list_turns(self, p: ListTurnsParams) -> dict[str, Any]:
        since, until = self._time(p.since, "since"), self._time(p.until, "until")
        total, page = await self._browsable().list_turns(since=since, until=until, channel=p.channel,
                                                         author=p.author, ids=p.ids, newest_first=p.newest_first,
                                                         limit=p.limit, offset=p.offset)
        nxt = p.offset + len(page)
        return {"total": total, "offset": p.offset, "limit": p.limit, "next_offset": nxt if nxt < total else None,
                "turns": [self._out(t) for t in page]}

    async def turn_activity(self, p: ActivityParams) -> dict[str, Any]:
        tz = self.memory.tz
        last = (parse_timestamp(p.until, tz, "until") if p.until else now_utc()).astimezone(tz).date()
        try:
            first = last - timedelta(days=p.days - 1)
            days = [first + timedelta(days=i) for i in range(p.days + 1)]
            starts = [to_storage(datetime.combine(d, time(), tz)) for d in days]
        except OverflowError:
            raise InvalidParams("until: too near the edge of the calendar", param="until") from None
        minute = any((datetime.combine(d, time(), tz).utcoffset() or timedelta()).total_seconds() % 3600
                     for d in days)
        pad = ":00.000Z" if minute else ":00:00.000Z"
        # 'YYYY-MM-DDTHH:MM' buckets for zones off the hour, else 'YYYY-MM-DDTHH'
        turns, backlog, summed = await self._browsable().activity(starts[0], starts[-1], 16 if minute else 13)

        def day_of(bucket: str) -> int:
            return max(0, bisect_right(starts, bucket + pad) - 1)

        out: list[dict[str, Any]] = [{"date": d.isoformat(), "turns": {}, "total": 0, "summarized": 0}
                                     for d in days[:-1]]
        channels: dict[str, int] = {}
        for bucket, channel, n in turns:
            day = out[min(day_of(bucket), p.days - 1)]
            day["turns"][channel] = day["turns"].get(channel, 0) + n
            day["total"] += n
            channels[channel] = channels.get(channel, 0) + n
        for bucket, n in summed:
            out[min(day_of(bucket), p.days - 1)]["summarized"] += n
        for day in out:  # at the end of each day: turns dated up to then minus turns summarized by then
            backlog += day["total"] - day.pop("summarized")
            day["backlog"] = max(0, backlog)
        return {"zone": str(tz), "first": days[0].isoformat(), "last": days[-2].isoformat(),
                "channels": dict(sorted(channels.items(), key=lambda kv: -kv[1])), "days": out}

    # -- forgetting -------------------------------------------------------------------------------

    async def forget(self, ids: list[int], who: str, how: str) -> dict[str, Any]:
        """Delete turns for good in the store, recording in the same transaction every copy that still owes the
        forget (``memory.events.owed_copies``); then run every declared copy's forget and strike off the ones
        that confirmed. What failed stays owed (``pending``), retried at open, by upkeep and here first."""
        store = self._open_store()
        async with self._settling:
            earlier = await self._settle()
            owed = self.memory.events.owed_copies()
            out = await store.forget(ids, who, how, owed=owed)
            self.retriever.invalidate()
            owed_id = out.pop("owed", None)
            gone = out["forgotten"]
            failed: dict[str, str] = {}
            pending: list[str] = []
            if gone:
                record = next((r for r in await store.owed_forgets(texts=True) if r["id"] == owed_id), None) \
                    if owed_id is not None else None
                turns = ForgottenTurns(tuple(gone), tuple(record["texts"]) if record else (),
                                       tuple(record["message_ids"]) if record else (), who)
                failed = await self.memory.events.forget_copies(turns)
                if owed_id is not None:
                    pending = await store.settle_forget(owed_id, [k for k in owed if k not in failed])
        out["count"] = len(gone)
        out["pending"] = sorted(pending)
        out["settled"] = earlier["settled"]
        problems = list(failed.values()) + earlier["incomplete"]
        if problems:
            out["incomplete"] = problems
        if pending or earlier["owed"]:
            out["note"] = OWED_NOTE
        return out

    async def owed_forgets(self) -> list[dict[str, Any]]:
        """What forgets still owe, oldest first: ``{"id", "forgotten_at", "turns", "copies"}`` (never text)."""
        return [{"id": r["id"], "forgotten_at": r["forgotten_at"], "turns": len(r["turn_ids"]), "copies": r["copies"]}
                for r in await self._open_store().owed_forgets()]

    async def settle_owed_forgets(self) -> dict[str, Any]:
        """Run every owed copy's forget again (when the entity opens, by upkeep): see :meth:`_settle`."""
        async with self._settling:
            return await self._settle()

    async def _settle(self) -> dict[str, Any]:
        """Each owed forget: its copies' forget once more, those that confirm struck off (the record, texts and
        all, goes with the last). ``{"settled": forgets finished, "owed": forgets still owed, "pending": {copy:
        forgets it owes}, "incomplete": [why]}``."""
        store = self._open_store()
        settled = 0
        pending: dict[str, int] = {}
        problems: list[str] = []
        down: dict[str, str] = {}  # a copy that failed now is not asked again in this round (a server down)
        for record in await store.owed_forgets(texts=True):
            turns = ForgottenTurns(tuple(record["turn_ids"]), tuple(record["texts"]), tuple(record["message_ids"]),
                                   record["who"])
            ask = [k for k in record["copies"] if k not in down]
            failed = {**(await self.memory.events.forget_copies(turns, ask) if ask else {}),
                      **{k: down[k] for k in record["copies"] if k in down}}
            down.update(failed)
            confirmed = [k for k in record["copies"] if k not in failed]
            left = await store.settle_forget(record["id"], confirmed) if confirmed else list(record["copies"])
            if not left:
                settled += 1
            for key in left:
                pending[key] = pending.get(key, 0) + 1
            problems += [p for p in failed.values() if p not in problems]
        owed = len(await store.owed_forgets()) if pending else 0
        return {"settled": settled, "owed": owed, "pending": pending, "incomplete": problems}

    async def forget_turns(self, p: ForgetTurnsParams) -> dict[str, Any]:
        return await self.forget(p.ids, p.requested_by, "ids")

    async def forget_range(self, p: ForgetRangeParams) -> dict[str, Any]:
        since = to_storage(parse_timestamp(p.since, self.memory.tz, "since"))
        until = to_storage(parse_timestamp(p.until, self.memory.tz, "until"))
        if since >= until:
            raise InvalidParams("since: must be before until", param="since")
        ids = await self._open_store().in_range(p.channel, since, until)
        out = await self.forget(ids, p.requested_by, "range")  # the log keeps no channel name
        return {"channel": p.channel, "since": since, "until": until, **out}

    async def forget_search(self, p: ForgetSearchParams) -> dict[str, Any]:
        """Two steps. The first lists only turns that contain a word of the query (BM25, with the words each
        matched: a turn found only "by meaning" is never offered for deletion), scored by the calibrated lexical
        model (the share of the query's word weight they hold) and under raw_capture's floor left out
        (``min_score``), and returns a token; the token is
        kept in the store (digests, 10 minutes, one use), so any process (``pps call``) can confirm it."""
        store = self._open_store()
        query_digest = hashlib.sha256(f"{p.channel or ''}\x00{p.query}".encode("utf-8", "surrogatepass")).hexdigest()
        if p.confirm is not None:
            token_digest = hashlib.sha256(p.confirm.encode("utf-8", "surrogatepass")).hexdigest()
            ids = await store.take_forget_token(token_digest, query_digest, _time.time())
            if ids is None:
                raise NotFound("confirm: no such token for this query (tokens last 10 minutes and work once); "
                               "call forget_search without confirm again", param="confirm")
            return await self.forget(ids, p.requested_by, "search")
        from pps_core.textsearch import content_terms

        floor = self.floor(self.raw, p.min_score)
        terms = content_terms(p.query)[:64]
        scores = await store.lexical_turns(terms, 200, p.channel) if terms else {}
        found = {t["id"]: t for t in await store.turns_by_ids(sorted(scores))}
        weights = await self.retriever.weights(terms)
        rarest = weights.rarest
        model = retrieval.CALIBRATION["plain"]
        scored = []
        for i, bm25 in scores.items():
            t = found.get(i)
            matched = sorted(retrieval.matched_terms(terms, t["content"])) if t else []
            if t is None or not matched:  # only turns that hold a word of the query: never one "by meaning"
                continue
            x = {"coverage": weights.coverage(matched), "rare": float(rarest in matched)}
            score = model(x)
            if score >= floor:
                scored.append((score, bm25, i, t, matched, x))
        scored.sort(key=lambda r: (-r[0], -r[1], r[2]))
        matches = []
        for score, bm25, i, t, matched, x in scored[:p.limit]:
            matches.append({"id": i, "score": round(score, 4), "matched": matched,
                            "scores": {"bm25": round(bm25, 4), "coverage": round(x["coverage"], 4),
                                       "rare": bool(x["rare"]), "probability": round(score, 4)},
                            "created_at": t["created_at"],
                            "local_time": render_iso_local(t["created_at"], self.memory.tz),
                            "channel": t["channel"], "author_name": t["author_name"], "content": t["content"]})
        token = secrets.token_urlsafe(18) if matches else None
        if token:
            now = _time.time()
            await store.save_forget_token(hashlib.sha256(token.encode()).hexdigest(), query_digest,
                                          [m["id"] for m in matches], now + TOKEN_TTL_S, now)
        return {"query": p.query, "count": len(matches), "min_score": floor, "confirm": token,
                "expires_in_s": int(TOKEN_TTL_S) if token else None,
                "instructions": "Nothing is deleted yet. Check these turns, then call forget_search again with the "
                                "same query and confirm=<token> to delete exactly them." if token else
                                f"Nothing found: no turn holds a word of this query with a score of at least "
                                f"{floor:g} (min_score=0 lists every turn holding one of its words).",
                "matches": matches}

    async def forget_log(self, p: ForgetLogParams) -> dict[str, Any]:
        total, entries = await self._open_store().forget_log(p.limit, p.offset)
        return {"total": total, "entries": entries}

    # -- the catalog ------------------------------------------------------------------------------

    def operations(self) -> list[Operation]:
        """Every turn operation, bound to this domain (the adapter's ``pps_operations`` returns them)."""
        return operations(lambda _memory: self)


def operations(domain_of: Callable[[Any], TurnDomain]) -> list[Operation]:
    """The turn operations; each handler runs the method of ``domain_of(memory)`` named like it."""

    def h(method: str) -> Callable[[Any, Any], Awaitable[Any]]:
        async def handler(memory: Any, p: Any) -> Any:
            return await getattr(domain_of(memory), method)(p)

        handler.__name__ = method
        handler.__doc__ = getattr(TurnDomain, method).__doc__
        return handler

    ro = {"read_only": True, "idempotent": True}
    gone = ("Deletes for good: the turn, its full text, its vector, every summary that covered it (the turns it "
            "still covered go back to the backlog, to be summarized again), and every copy another plugin declared "
            "(graph episodes and facts, the recap; see turn_copies): a copy that cannot forget now (a graph that is down) is "
            "owed, named in pending and retried until it confirms. Its message_id is never stored again (an "
            "import or a hook that brings it back stores nothing). Logged (ids, time, requested_by), never the "
            "content.")
    return [
        # not idempotent: without message_id a repeat stores a second turn (MCP's idempotentHint must hold for
        # every call); with message_id a repeat stores nothing and answers as the first did
        Operation("store_message", TurnIn, h("store_message"), group="capture",
                  description="Store one turn verbatim (<private>...</private> spans dropped). With message_id, a "
                              "repeat stores nothing new and answers as the first did; without it, it stores again."),
        Operation("store_messages", StoreMessagesParams, h("store_messages"), group="capture",
                  description="Store a batch of turns ({\"messages\": [...]}) in one transaction: all or nothing. "
                              "Turns with a message_id already stored are not stored again."),
        Operation("raw_search", SearchParams, h("raw_search"), group="raw", essential=True, **ro,
                  description="Search every stored turn (full text, ranked). Plain language; no query syntax."),
        Operation("poll_channels", PollParams, h("poll_channels"), group="channels",
                  description="Unread turns from other channels since this consumer's cursor, oldest first; "
                              "advances the cursor. A new consumer starts at now."),
        Operation("summarize_messages", SummarizeParams, h("summarize_messages"), group="summaries", **ro,
                  description="The oldest unsummarized turns, with their ids, for a summarizer. Store the result "
                              "with store_summary(message_ids=...)."),
        Operation("store_summary", StoreSummaryParams, h("store_summary"), group="summaries",
                  description="Store a summary and mark exactly the turns it covers (message_ids, or a start_id/"
                              "end_id range that must hold only unsummarized turns). Refuses empty, reversed or "
                              "already summarized input; nothing is half-written."),
        Operation("get_recent_summaries", LimitParams, h("get_recent_summaries"), group="summaries", essential=True, **ro,
                  description="The newest summaries, newest first, full text."),
        Operation("search_summaries", SearchParams, h("search_summaries"), group="summaries", **ro,
                  description="Search summaries (full text; hybrid with vectors when an embedder is loaded)."),
        Operation("summary_stats", NoParams, h("summary_stats"), group="summaries", **ro,
                  description="Counts: total_messages, unsummarized_count, summaries, by channel."),
        Operation("get_turns_since_summary", TurnsSinceSummaryParams, h("get_turns_since_summary"),
                  group="navigation", essential=True, **ro,
                  description="Unsummarized turns, paged from the newest (offset counts back) or the oldest; "
                              "each page is chronological."),
        Operation("get_conversation_context", ConversationContextParams, h("get_conversation_context"),
                  group="navigation", **ro,
                  description="About N turns of context: raw turns, plus the newest summaries (~50 turns each) "
                              "when there are fewer unsummarized turns than N."),
        Operation("get_turns_since", TurnsSinceParams, h("get_turns_since"), group="navigation", **ro,
                  description="Every turn at or after a moment (ISO 8601; no zone = the entity's zone), and the "
                              "summaries that overlap it. Default limit 1000."),
        Operation("get_turns_around", TurnsAroundParams, h("get_turns_around"), group="navigation", essential=True, **ro,
                  description="A window of turns around a moment: count turns, before_ratio of them before it."),
        Operation("list_turns", ListTurnsParams, h("list_turns"), group="navigation", **ro,
                  description="Turns in time order between two moments, optionally of one channel (or channel "
                              "family) and one author, a page at a time, with the total and the summary "
                              "covering each (summary_id)."),
        Operation("turn_activity", ActivityParams, h("turn_activity"), group="navigation", **ro,
                  description="Per day (in the entity's zone): turns per channel, and the unsummarized backlog at "
                              "the end of the day (turns dated up to then minus turns summarized by then; an "
                              "imported history counts from its own dates)."),
        Operation("forget_turns", ForgetTurnsParams, h("forget_turns"), group="forget", destructive=True,
                  idempotent=True, description="Forget turns by id. " + gone),
        Operation("forget_range", ForgetRangeParams, h("forget_range"), group="forget", destructive=True,
                  idempotent=True,
                  description="Forget every turn of a channel (or channel family) between since and until. " + gone),
        Operation("forget_search", ForgetSearchParams, h("forget_search"), group="forget", destructive=True,
                  description="Forget the turns a search finds, in two steps: the first call lists the matches and "
                              "returns a confirm token (nothing deleted); the same call with confirm=<token> deletes "
                              "exactly those. " + gone),
        Operation("forget_log", ForgetLogParams, h("forget_log"), group="forget", read_only=True, idempotent=True,
                  description="What was forgotten, newest first: turn ids, time, requested_by, summaries flagged. "
                              "Never content."),
    ]

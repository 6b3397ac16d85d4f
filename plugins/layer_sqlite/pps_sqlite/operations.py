"""The sqlite plugin's operations: capture, search, summaries, navigation, channels."""

from __future__ import annotations

import math
from typing import Any

from pps_core import Operation
from pps_core.errors import InvalidParams
from pps_core.timeutil import now_utc, parse_timestamp, render_iso_local, to_storage

from .forget import drop_private
from .params import (
    ConversationContextParams,
    LimitParams,
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

TURNS_PER_SUMMARY = 50


def _raw(memory):
    return memory.require_layer("raw_capture")


def _store(memory):
    """The raw_capture layer's TurnStore (SQLite, PostgreSQL, ...): every handler below goes through it."""
    return _raw(memory).backend


def _out(memory, t: dict[str, Any]) -> dict[str, Any]:
    t = dict(t)
    t["local_time"] = render_iso_local(t["created_at"], memory.tz)
    return t


def _sum_out(memory, s: dict[str, Any]) -> dict[str, Any]:
    s = dict(s)
    for key in ("time_span_start", "time_span_end"):
        if s.get(key):
            s[key + "_local"] = render_iso_local(s[key], memory.tz)
    return s


def _prepare(memory, turn: TurnIn, where: str) -> dict[str, Any]:
    limit = memory.settings.limits.max_content_chars
    if len(turn.content) > limit:
        raise InvalidParams(f"{where}content: {len(turn.content)} characters, the limit is {limit}",
                            param=f"{where}content")
    created = (to_storage(parse_timestamp(turn.created_at, memory.tz, f"{where}created_at"))
               if turn.created_at else to_storage(now_utc()))
    return {**turn.model_dump(), "content": drop_private(turn.content), "created_at": created}


# -- capture -----------------------------------------------------------------------------------


async def store_message(memory, p: TurnIn):
    acks = await _raw(memory).store([_prepare(memory, p, "")])
    return {"stored": True, **acks[0]}


async def store_messages(memory, p: StoreMessagesParams):
    if len(p.messages) > memory.settings.limits.max_batch:
        raise InvalidParams(f"messages: at most {memory.settings.limits.max_batch} turns per call", param="messages")
    batch = [_prepare(memory, t, f"messages.{i}.") for i, t in enumerate(p.messages)]
    acks = await _raw(memory).store(batch)
    return {"stored": len(acks), "ids": [a["id"] for a in acks], "acks": acks}


async def raw_search(memory, p: SearchParams):
    if p.channel:
        found = await _raw(memory).retriever.search(p.query, p.limit, p.offset, p.channel)
        return {"query": p.query, "count": len(found), "offset": p.offset, "results": [_out(memory, t) for t in found]}
    results = await memory.search_layer("raw_capture", p.query, p.limit, p.offset)
    return {"query": p.query, "count": len(results), "offset": p.offset,
            "results": [{"id": int(r.source), "content": r.content, "author_name": r.metadata.get("author_name"),
                         "channel": r.metadata.get("channel"), "session_id": r.metadata.get("session_id"),
                         "message_id": r.metadata.get("message_id"), "summary_id": r.metadata.get("summary_id"),
                         "created_at": r.timestamp, "local_time": render_iso_local(r.timestamp, memory.tz),
                         "score": r.score, "scores": r.metadata.get("scores"),
                         "metadata": r.metadata.get("metadata") or {}} for r in results]}


# -- summaries ---------------------------------------------------------------------------------


async def summarize_messages(memory, p: SummarizeParams):
    total, batch = await _store(memory).unsummarized_page(p.limit, oldest_first=True)
    ids = [t["id"] for t in batch]
    lines = [f"[{render_iso_local(t['created_at'], memory.tz)}] [{t['channel']}] {t['author_name']}: {t['content']}"
             for t in batch]
    return {
        "count": len(batch), "unsummarized_count": total,
        # in time order, so the ids need not be contiguous: store with message_ids (start/end only bound them)
        "start_id": min(ids) if ids else None, "end_id": max(ids) if ids else None, "message_ids": ids,
        "channels": sorted({t["channel"] for t in batch}),
        "messages": [_out(memory, t) for t in batch],
        "transcript": "\n".join(lines),
        "instructions": ("Summarize these turns faithfully: keep who said what (use the author names as given), "
                         "add nothing they do not say. Then call store_summary with summary_text and "
                         "message_ids (exactly these ids)."),
    }


async def store_summary(memory, p: StoreSummaryParams):
    stored = await _store(memory).store_summary(
        p.summary_text, start_id=p.start_id, end_id=p.end_id, message_ids=p.message_ids,
        channels=p.channels, summary_type=p.summary_type)
    from pps_core.models import Summary

    memory.events.summary_stored(Summary(**{k: stored[k] for k in Summary.model_fields}))
    return _sum_out(memory, stored)


async def get_recent_summaries(memory, p: LimitParams):
    found = await _store(memory).recent_summaries(p.limit, p.offset)
    return {"count": len(found), "summaries": [_sum_out(memory, s) for s in found]}


async def search_summaries(memory, p: SearchParams):
    results = await memory.search_layer("message_summaries", p.query, p.limit, p.offset)
    return {"query": p.query, "count": len(results),
            "results": [{"id": int(r.source.split()[-1]), "summary_text": r.content, "score": r.score,
                         "time_span_end": r.timestamp, **r.metadata} for r in results]}


async def summary_stats(memory, _p: NoParams):
    return await _store(memory).summary_stats()


# -- navigation (reference/001) ----------------------------------------------------------------


async def get_turns_since_summary(memory, p: TurnsSinceSummaryParams):
    total, page = await _store(memory).unsummarized_page(p.limit, p.offset, oldest_first=p.oldest_first,
                                                         channel=p.channel)
    nxt = p.offset + len(page)
    return {"total_unsummarized": total, "offset": p.offset, "limit": p.limit, "count": len(page),
            "order": "oldest_first" if p.oldest_first else "newest_first (each page chronological)",
            "next_offset": nxt if nxt < total else None, "turns": [_out(memory, t) for t in page]}


async def get_conversation_context(memory, p: ConversationContextParams):
    empty = {"unsummarized_count": 0, "summaries_count": 0, "raw_turns_count": 0, "turns_covered_approx": 0,
             "summaries": [], "raw_turns": []}
    count, sums, raw = await _store(memory).context(p.turns, TURNS_PER_SUMMARY)
    if p.turns == 0:
        return {**empty, "unsummarized_count": count}
    covered = len(raw) + sum(s["message_count"] for s in sums)
    return {"unsummarized_count": count, "summaries_count": len(sums), "raw_turns_count": len(raw),
            "turns_covered_approx": covered, "summaries": [_sum_out(memory, s) for s in sums],
            "raw_turns": [_out(memory, t) for t in raw]}


async def get_turns_since(memory, p: TurnsSinceParams):
    ts = to_storage(parse_timestamp(p.timestamp, memory.tz, "timestamp"))
    msgs, more, sums = await _store(memory).since(ts, p.limit, p.include_summaries)
    return {"timestamp_start": p.timestamp, "timestamp_start_utc": ts, "messages_count": len(msgs),
            "summaries_count": len(sums), "truncated": more, "limit": p.limit,
            "messages": [_out(memory, t) for t in msgs], "summaries": [_sum_out(memory, s) for s in sums]}


async def get_turns_around(memory, p: TurnsAroundParams):
    if math.isnan(p.before_ratio):
        raise InvalidParams("before_ratio: must be a number between 0 and 1", param="before_ratio")
    ts = to_storage(parse_timestamp(p.timestamp, memory.tz, "timestamp"))
    ratio = min(1.0, max(0.0, p.before_ratio))
    before_n = int(p.count * ratio)
    before, after = await _store(memory).around(ts, before_n, p.count - before_n)
    msgs = before + after
    return {"center_timestamp": p.timestamp, "center_timestamp_utc": ts, "before_ratio": ratio,
            "before_count": len(before), "after_count": len(after), "total_count": len(msgs),
            "messages": [_out(memory, t) for t in msgs]}


async def poll_channels(memory, p: PollParams):
    found = await _store(memory).poll(p.consumer_key, p.channel, p.limit)
    found["turns"] = [_out(memory, t) for t in found["turns"]]
    return found


def operations() -> list[Operation]:
    from .browse import operations as browsing
    from .forget import operations as forgetting

    ro = {"read_only": True, "idempotent": True}
    return [
        # not idempotent: without message_id a repeat stores a second turn (MCP's idempotentHint must hold for
        # every call); with message_id a repeat stores nothing and answers as the first did
        Operation("store_message", TurnIn, store_message, group="capture",
                  description="Store one turn verbatim (<private>...</private> spans dropped). With message_id, a "
                              "repeat stores nothing new and answers as the first did; without it, it stores again."),
        Operation("store_messages", StoreMessagesParams, store_messages, group="capture",
                  description="Store a batch of turns ({\"messages\": [...]}) in one transaction: all or nothing. "
                              "Turns with a message_id already stored are not stored again."),
        Operation("raw_search", SearchParams, raw_search, group="raw", essential=True, **ro,
                  description="Search every stored turn (full text, ranked). Plain language; no query syntax."),
        Operation("poll_channels", PollParams, poll_channels, group="channels",
                  description="Unread turns from other channels since this consumer's cursor, oldest first; "
                              "advances the cursor. A new consumer starts at now."),
        Operation("summarize_messages", SummarizeParams, summarize_messages, group="summaries", **ro,
                  description="The oldest unsummarized turns, with their ids, for a summarizer. Store the result "
                              "with store_summary(message_ids=...)."),
        Operation("store_summary", StoreSummaryParams, store_summary, group="summaries",
                  description="Store a summary and mark exactly the turns it covers (message_ids, or a start_id/"
                              "end_id range that must hold only unsummarized turns). Refuses empty, reversed or "
                              "already summarized input; nothing is half-written."),
        Operation("get_recent_summaries", LimitParams, get_recent_summaries, group="summaries", essential=True, **ro,
                  description="The newest summaries, newest first, full text."),
        Operation("search_summaries", SearchParams, search_summaries, group="summaries", **ro,
                  description="Search summaries (full text; hybrid with vectors when an embedder is loaded)."),
        Operation("summary_stats", NoParams, summary_stats, group="summaries", **ro,
                  description="Counts: total_messages, unsummarized_count, summaries, by channel."),
        Operation("get_turns_since_summary", TurnsSinceSummaryParams, get_turns_since_summary, group="navigation", essential=True,
                  **ro, description="Unsummarized turns, paged from the newest (offset counts back) or the oldest; "
                                    "each page is chronological."),
        Operation("get_conversation_context", ConversationContextParams, get_conversation_context,
                  group="navigation", **ro,
                  description="About N turns of context: raw turns, plus the newest summaries (~50 turns each) "
                              "when there are fewer unsummarized turns than N."),
        Operation("get_turns_since", TurnsSinceParams, get_turns_since, group="navigation", **ro,
                  description="Every turn at or after a moment (ISO 8601; no zone = the entity's zone), and the "
                              "summaries that overlap it. Default limit 1000."),
        Operation("get_turns_around", TurnsAroundParams, get_turns_around, group="navigation", essential=True, **ro,
                  description="A window of turns around a moment: count turns, before_ratio of them before it."),
    ] + browsing() + forgetting()

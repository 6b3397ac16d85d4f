"""Forgetting: turns deleted for good (by ids, by a time range of a channel, by a search the caller confirms),
and ``<private>...</private>`` spans dropped before anything is stored.

A forgotten turn leaves the turn table, the full-text index and its vector (``TurnStore.forget``), and every
plugin deletes what it derived from it (``memory.events.messages_forgotten``: the graph's episodes and the facts
extracted only from them). Summaries that covered it are flagged for rewrite. The forget log keeps ids, time and
who asked; never content.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from pydantic import Field, field_validator

from pps_core import Operation
from pps_core.errors import InvalidParams, NotFound
from pps_core.timeutil import parse_timestamp, render_iso_local, to_storage

from .params import MAX_LIMIT, _Params

#: ``<private>...</private>`` (any case, across lines); an unclosed tag hides everything after it.
PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)
#: What a turn that was nothing but private spans keeps: that someone spoke then, not what was said.
PRIVATE_ONLY = "[private]"
#: How long a forget_search confirmation token stays valid.
TOKEN_TTL_S = 600.0


def drop_private(text: str) -> str:
    """``text`` without its private spans (and without the blank lines they leave)."""
    if "<" not in text or not PRIVATE.search(text):
        return text
    kept = PRIVATE.sub("", text)
    kept = re.sub(r"[ \t]+\n", "\n", re.sub(r"\n{3,}", "\n\n", kept)).strip()
    return kept or PRIVATE_ONLY


class _Who(_Params):
    requested_by: str = Field("unspecified", min_length=1, max_length=200,
                              description="who asked to forget (kept in the forget log; never the content)")


class ForgetTurnsParams(_Who):
    ids: list[int] = Field(..., min_length=1, max_length=MAX_LIMIT, description="turn ids to delete for good")

    @field_validator("ids")
    @classmethod
    def _ids(cls, v: list[int]) -> list[int]:
        if any(i < 1 for i in v):
            raise ValueError("ids are positive integers")
        return v


class ForgetRangeParams(_Who):
    channel: str = Field(..., min_length=1, max_length=200,
                         description="this channel, or every channel under it ('terminal' = 'terminal:*')")
    since: str = Field(..., min_length=1, max_length=64, description="from this moment (ISO 8601; no zone = entity's)")
    until: str = Field(..., min_length=1, max_length=64, description="up to (not including) this moment")


class ForgetSearchParams(_Who):
    query: str = Field(..., min_length=1, max_length=10_000, description="what to find (as raw_search)")
    channel: str | None = Field(None, max_length=200, description="only turns of this channel")
    limit: int = Field(20, ge=1, le=100, description="at most this many matches")
    confirm: str | None = Field(None, max_length=100,
                                description="the token the first call returned: deletes exactly the turns it listed")


class ForgetLogParams(_Params):
    limit: int = Field(20, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=1_000_000)


def _raw(memory):
    return memory.require_layer("raw_capture")


async def _forget(memory, ids: list[int], who: str, how: str) -> dict[str, Any]:
    out = await _raw(memory).backend.forget(ids, who, how)
    incomplete = await memory.events.messages_forgotten(out["forgotten"]) if out["forgotten"] else []
    out["count"] = len(out["forgotten"])
    if incomplete:
        out["incomplete"] = incomplete
    return out


async def forget_turns(memory, p: ForgetTurnsParams):
    return await _forget(memory, p.ids, p.requested_by, "ids")


async def forget_range(memory, p: ForgetRangeParams):
    since = to_storage(parse_timestamp(p.since, memory.tz, "since"))
    until = to_storage(parse_timestamp(p.until, memory.tz, "until"))
    if since >= until:
        raise InvalidParams("since: must be before until", param="since")
    ids = await _raw(memory).backend.in_range(p.channel, since, until)
    out = await _forget(memory, ids, p.requested_by, f"range {p.channel} {since}..{until}")
    return {"channel": p.channel, "since": since, "until": until, **out}


async def forget_search(memory, p: ForgetSearchParams):
    layer = _raw(memory)
    pending: dict[str, tuple[float, str, list[int]]] = layer.__dict__.setdefault("_forget_tokens", {})
    now = time.monotonic()
    for token in [t for t, (exp, _q, _i) in pending.items() if exp < now]:
        del pending[token]
    if p.confirm is not None:
        entry = pending.get(p.confirm)
        if entry is None or entry[1] != p.query:
            raise NotFound("confirm: no such token for this query (tokens last 10 minutes and work once); "
                           "call forget_search without confirm again", param="confirm")
        del pending[p.confirm]
        return await _forget(memory, entry[2], p.requested_by, "search")
    found = await layer.retriever.search(p.query, p.limit, 0, p.channel)
    ids = [t["id"] for t in found]
    token = secrets.token_urlsafe(18) if ids else None
    if token:
        pending[token] = (now + TOKEN_TTL_S, p.query, ids)
    return {"query": p.query, "count": len(ids), "confirm": token, "expires_in_s": int(TOKEN_TTL_S) if token else None,
            "instructions": "Nothing is deleted yet. Check these turns, then call forget_search again with the "
                            "same query and confirm=<token> to delete exactly them." if token else "No match.",
            "matches": [{"id": t["id"], "created_at": t["created_at"],
                         "local_time": render_iso_local(t["created_at"], memory.tz), "channel": t["channel"],
                         "author_name": t["author_name"], "content": t["content"]} for t in found]}


async def forget_log(memory, p: ForgetLogParams):
    total, entries = await _raw(memory).backend.forget_log(p.limit, p.offset)
    return {"total": total, "entries": entries}


def operations() -> list[Operation]:
    gone = ("Deletes for good: the turn, its full text, its vector, the graph's episodes of it and the facts "
            "extracted only from them; summaries that covered it are flagged for rewrite. Logged (ids, time, "
            "requested_by), never the content.")
    return [
        Operation("forget_turns", ForgetTurnsParams, forget_turns, group="forget", destructive=True, idempotent=True,
                  description="Forget turns by id. " + gone),
        Operation("forget_range", ForgetRangeParams, forget_range, group="forget", destructive=True,
                  idempotent=True,
                  description="Forget every turn of a channel (or channel family) between since and until. " + gone),
        Operation("forget_search", ForgetSearchParams, forget_search, group="forget", destructive=True,
                  description="Forget the turns a search finds, in two steps: the first call lists the matches and "
                              "returns a confirm token (nothing deleted); the same call with confirm=<token> deletes "
                              "exactly those. " + gone),
        Operation("forget_log", ForgetLogParams, forget_log, group="forget", read_only=True, idempotent=True,
                  description="What was forgotten, newest first: turn ids, time, requested_by, summaries flagged. "
                              "Never content."),
    ]

"""Browsing turns as a person does (by time, channel and author, a page at a time) and activity per day.

``list_turns`` and ``turn_activity`` serve the memory explorer's timeline and plots; both answer from
indexes and GROUP BY, so a page never loads the whole history.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_right
from datetime import datetime, time, timedelta
from typing import Any

from pydantic import Field

from pps_core import Operation
from pps_core.errors import InvalidParams, Unavailable
from pps_core.timeutil import now_utc, parse_timestamp, render_iso_local, to_storage

from .params import _Params
from .turns import COLUMNS, row_to_turn


class ListTurnsParams(_Params):
    since: str | None = Field(None, max_length=64, description="from this moment (ISO 8601; no zone = entity's zone)")
    until: str | None = Field(None, max_length=64, description="before this moment")
    channel: str | None = Field(None, max_length=200,
                                description="this channel, or every channel under it ('terminal' = 'terminal:*')")
    author: str | None = Field(None, max_length=200, description="this author (case-insensitive)")
    ids: list[int] | None = Field(None, min_length=1, max_length=1000, description="only these turn ids")
    newest_first: bool = False
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=1_000_000)


class ActivityParams(_Params):
    days: int = Field(30, ge=1, le=366, description="how many days, ending with the day of `until`")
    until: str | None = Field(None, max_length=64, description="the last day's moment (default now)")


def _where(p: ListTurnsParams, since: str | None, until: str | None) -> tuple[str, list[Any]]:
    clauses, args = [], []
    if since:
        clauses.append("created_at >= ?")
        args.append(since)
    if until:
        clauses.append("created_at < ?")
        args.append(until)
    if p.channel:
        clauses.append("(channel = ? OR substr(channel, 1, ?) = ?)")
        args += [p.channel, len(p.channel) + 1, p.channel + ":"]
    if p.author:
        clauses.append("author_name = ? COLLATE NOCASE")
        args.append(p.author)
    if p.ids:
        clauses.append(f"id IN ({', '.join('?' * len(p.ids))})")
        args += p.ids
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def _list(conn: sqlite3.Connection, p: ListTurnsParams, since: str | None, until: str | None):
    where, args = _where(p, since, until)
    total = conn.execute(f"SELECT COUNT(*) FROM messages{where}", args).fetchone()[0]
    order = "DESC" if p.newest_first else "ASC"
    rows = conn.execute(f"SELECT {COLUMNS} FROM messages{where} ORDER BY created_at {order}, id {order} "
                        "LIMIT ? OFFSET ?", [*args, p.limit, p.offset]).fetchall()
    return total, [row_to_turn(r) for r in rows]


def _activity(conn: sqlite3.Connection, start: str, end: str, minute: bool):
    width = 16 if minute else 13  # 'YYYY-MM-DDTHH:MM' for zones off the hour, else 'YYYY-MM-DDTHH'
    turns = conn.execute(f"SELECT substr(created_at, 1, {width}), channel, COUNT(*) FROM messages "
                         "WHERE created_at >= ? AND created_at < ? GROUP BY 1, 2", (start, end)).fetchall()
    before = conn.execute("SELECT COUNT(*) FROM messages WHERE created_at < ?", (start,)).fetchone()[0]
    summed_before = conn.execute(
        "SELECT COALESCE(SUM(message_count), 0) FROM message_summaries WHERE created_at < ?", (start,)).fetchone()[0]
    summed = conn.execute(f"SELECT substr(created_at, 1, {width}), SUM(message_count) FROM message_summaries "
                          "WHERE created_at >= ? AND created_at < ? GROUP BY 1", (start, end)).fetchall()
    return turns, before - summed_before, summed


def _store(memory):
    store = memory.require_layer("raw_capture").backend
    if not hasattr(store, "_run"):
        raise Unavailable("browsing turns needs the sqlite store")
    return store


def _time(memory, value: str | None, param: str) -> str | None:
    return to_storage(parse_timestamp(value, memory.tz, param)) if value else None


async def list_turns(memory, p: ListTurnsParams):
    since, until = _time(memory, p.since, "since"), _time(memory, p.until, "until")
    total, page = await _store(memory)._run(_list, p, since, until)
    for t in page:
        t["local_time"] = render_iso_local(t["created_at"], memory.tz)
    nxt = p.offset + len(page)
    return {"total": total, "offset": p.offset, "limit": p.limit, "next_offset": nxt if nxt < total else None,
            "turns": page}


async def turn_activity(memory, p: ActivityParams):
    tz = memory.tz
    last = (parse_timestamp(p.until, tz, "until") if p.until else now_utc()).astimezone(tz).date()
    try:
        first = last - timedelta(days=p.days - 1)
        days = [first + timedelta(days=i) for i in range(p.days + 1)]
        starts = [to_storage(datetime.combine(d, time(), tz)) for d in days]
    except OverflowError:
        raise InvalidParams("until: too near the edge of the calendar", param="until") from None
    minute = any(datetime.combine(d, time(), tz).utcoffset().total_seconds() % 3600 for d in days)
    pad = ":00.000Z" if minute else ":00:00.000Z"
    turns, backlog, summed = await _store(memory)._run(_activity, starts[0], starts[-1], minute)

    def day_of(bucket: str) -> int:
        return max(0, bisect_right(starts, bucket + pad) - 1)

    out = [{"date": d.isoformat(), "turns": {}, "total": 0, "summarized": 0} for d in days[:-1]]
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


def operations() -> list[Operation]:
    ro = {"read_only": True, "idempotent": True}
    return [
        Operation("list_turns", ListTurnsParams, list_turns, group="navigation", **ro,
                  description="Turns in time order between two moments, optionally of one channel (or channel "
                              "family) and one author, a page at a time, with the total and the summary "
                              "covering each (summary_id)."),
        Operation("turn_activity", ActivityParams, turn_activity, group="navigation", **ro,
                  description="Per day (in the entity's zone): turns per channel, and the unsummarized backlog at "
                              "the end of the day (turns dated up to then minus turns summarized by then; an "
                              "imported history counts from its own dates)."),
    ]

"""Summaries: a summary marks exactly the turns it was given, in the same transaction."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from pps_core.errors import Conflict, InvalidParams, NotFound
from pps_core.textsearch import fts5_query

from .db import Tx

COLUMNS = ("id, summary_text, start_id, end_id, message_count, channels, time_span_start, time_span_end, "
           "summary_type, created_at, rewrite")


def row_to_summary(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"], "summary_text": row["summary_text"], "start_id": row["start_id"], "end_id": row["end_id"],
        "message_count": row["message_count"], "channels": json.loads(row["channels"] or "[]"),
        "time_span_start": row["time_span_start"], "time_span_end": row["time_span_end"],
        "summary_type": row["summary_type"], "created_at": row["created_at"], "rewrite": row["rewrite"],
    }


def store(conn: sqlite3.Connection, text: str, *, start_id: int | None, end_id: int | None,
          message_ids: list[int] | None, channels: list[str] | None, summary_type: str) -> dict[str, Any]:
    """Store a summary and mark its turns. Refuses empty, reversed or already summarized input."""
    with Tx(conn):
        if message_ids:
            ids = sorted(set(message_ids))
            marks = ",".join("?" * len(ids))
            rows = conn.execute(f"SELECT id, channel, created_at, summary_id FROM messages WHERE id IN ({marks})",
                                ids).fetchall()
            found = {r["id"] for r in rows}
            missing = [i for i in ids if i not in found]
            if missing:
                raise NotFound(f"store_summary: message_ids not found: {missing[:10]}", param="message_ids")
        else:
            if start_id is None or end_id is None:
                raise InvalidParams("store_summary: give message_ids, or both start_id and end_id", param="start_id")
            if start_id > end_id:
                raise InvalidParams(f"store_summary: reversed range: start_id {start_id} > end_id {end_id}",
                                    param="start_id")
            rows = conn.execute("SELECT id, channel, created_at, summary_id FROM messages WHERE id BETWEEN ? AND ? "
                                "ORDER BY id", (start_id, end_id)).fetchall()
            if not rows:
                raise NotFound(f"store_summary: no turns with ids {start_id}..{end_id}", param="start_id")
        done = [r["id"] for r in rows if r["summary_id"] is not None]
        if done:
            raise Conflict(f"store_summary: turns already summarized: {done[:10]}"
                           f"{' ...' if len(done) > 10 else ''}; nothing was stored", param="start_id")
        ids = [r["id"] for r in rows]
        times = sorted(r["created_at"] for r in rows)
        chans = channels or sorted({r["channel"] for r in rows})
        cur = conn.execute(
            "INSERT INTO message_summaries (summary_text, start_id, end_id, message_count, channels, "
            "time_span_start, time_span_end, summary_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (text, min(ids), max(ids), len(ids), json.dumps(chans), times[0], times[-1], summary_type))
        sid = cur.lastrowid
        marks = ",".join("?" * len(ids))
        marked = conn.execute(f"UPDATE messages SET summary_id = ? WHERE summary_id IS NULL AND id IN ({marks})",
                              [sid, *ids]).rowcount
        if marked != len(ids):  # a concurrent writer got there first: undo everything
            raise Conflict("store_summary: some turns were summarized concurrently; nothing was stored")
        row = conn.execute(f"SELECT {COLUMNS} FROM message_summaries WHERE id = ?", (sid,)).fetchone()
    return row_to_summary(row)


def recent(conn: sqlite3.Connection, limit: int, offset: int = 0) -> list[dict[str, Any]]:
    """Newest first, by the time they cover (a summary of backfilled turns takes its place in time)."""
    rows = conn.execute(f"SELECT {COLUMNS} FROM message_summaries ORDER BY time_span_end DESC, id DESC "
                        "LIMIT ? OFFSET ?",
                        (limit, offset)).fetchall()
    return [row_to_summary(r) for r in rows]


def search(conn: sqlite3.Connection, query: str, limit: int, offset: int = 0) -> list[dict[str, Any]]:
    match = fts5_query(query)
    if match is None:
        return []
    rows = conn.execute(
        f"SELECT {', '.join('s.' + c.strip() for c in COLUMNS.split(','))}, bm25(summaries_fts) AS rank "
        "FROM summaries_fts JOIN message_summaries s ON s.id = summaries_fts.rowid WHERE summaries_fts MATCH ? "
        "ORDER BY rank LIMIT ? OFFSET ?", (match, limit, offset)).fetchall()
    out = []
    for r in rows:
        s = row_to_summary(r)
        s["score"] = round(-r["rank"], 6)
        out.append(s)
    return out


def overlapping(conn: sqlite3.Connection, ts: str) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT {COLUMNS} FROM message_summaries WHERE time_span_end >= ? "
                        "ORDER BY time_span_start, id", (ts,)).fetchall()
    return [row_to_summary(r) for r in rows]


def stats(conn: sqlite3.Connection) -> dict[str, Any]:
    """Counters (kept by triggers) and the unsummarized turns' partial index: no scan of history."""
    c = dict(conn.execute("SELECT name, n FROM counters WHERE name IN ('messages', 'unsummarized', 'summaries')"))
    oldest = conn.execute("SELECT MIN(created_at) FROM messages INDEXED BY idx_messages_unsummarized "
                          "WHERE summary_id IS NULL").fetchone()[0]
    newest = conn.execute("SELECT created_at FROM message_summaries ORDER BY id DESC LIMIT 1").fetchone()
    by_channel = {r[0]: r[1] for r in conn.execute(
        "SELECT channel, COUNT(*) FROM messages INDEXED BY idx_messages_unsummarized WHERE summary_id IS NULL "
        "GROUP BY channel ORDER BY 2 DESC")}
    return {
        "total_messages": c["messages"], "unsummarized_count": c["unsummarized"],
        "summarized_count": c["messages"] - c["unsummarized"], "summary_count": c["summaries"],
        "oldest_unsummarized_at": oldest, "newest_summary_at": newest[0] if newest else None,
        "unsummarized_by_channel": by_channel, "needs_rewrite": needs_rewrite(conn),
    }


def needs_rewrite(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Summaries flagged for rewrite: a backfilled turn landed inside their span ('backfill'), or a turn they
    covered was forgotten ('forgotten')."""
    return [{"id": r[0], "reason": r[1]} for r in conn.execute(
        "SELECT id, rewrite FROM message_summaries WHERE rewrite IS NOT NULL ORDER BY id")]


def count(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT n FROM counters WHERE name = 'summaries'").fetchone()[0]

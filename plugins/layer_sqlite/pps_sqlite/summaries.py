"""Summaries: a summary marks exactly the turns it was given, in the same transaction."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from pps_core.errors import Conflict, InvalidParams, NotFound
from pps_core.textsearch import content_terms

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
          message_ids: list[int] | None, channels: list[str] | None, summary_type: str,
          created_at: str | None = None) -> dict[str, Any]:
    """Store a summary and mark its turns (written at ``created_at``, canonical form, else now). Refuses empty,
    reversed or already summarized input."""
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
            "time_span_start, time_span_end, summary_type, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
            "COALESCE(?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))",
            (text, min(ids), max(ids), len(ids), json.dumps(chans), times[0], times[-1], summary_type, created_at))
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


#: Summaries BM25 may rank per question before the bounded pass (``lexical.bounded``).
SEARCH_BUDGET = 4_000
_DF: dict[tuple[int, str], Any] = {}  # per connection (and file): term counts, cached


def _rank(conn: sqlite3.Connection, terms: list[str], n: int, mode: str, after: int) -> dict[int, float]:
    match = f" {mode} ".join('"' + t.replace('"', '""') + '"' for t in terms)
    rows = conn.execute("SELECT rowid, bm25(summaries_fts) AS rank FROM summaries_fts WHERE summaries_fts MATCH ? "
                        "AND rowid > ? ORDER BY rank LIMIT ?", (match, after, n))
    return {r[0]: -r[1] for r in rows}


def search(conn: sqlite3.Connection, query: str, limit: int, offset: int = 0, *, budget: int = SEARCH_BUDGET,
           df=None) -> list[dict[str, Any]]:
    """BM25 over summary text (an OR of the query's words), ranking at most about ``budget`` postings: past that,
    the bounded pass of ``lexical.bounded`` (exhaustive below it)."""
    from .lexical import DocFreq, bounded

    terms = content_terms(query)[:64]
    if not terms:
        return []
    total = conn.execute("SELECT n FROM counters WHERE name = 'summaries'").fetchone()[0]
    top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM message_summaries").fetchone()[0] if total > budget else 0
    if df is None and total > budget:
        key = (id(conn), conn.execute("PRAGMA database_list").fetchone()[2])
        if key not in _DF:
            if len(_DF) > 64:
                _DF.clear()
            _DF[key] = DocFreq("summaries_fts", "summary_text")
        df = _DF[key]
    scores = bounded(conn, terms, total, budget, df,
                     lambda ts, mode, after: _rank(conn, ts, limit + offset, mode, after), top)
    ids = sorted(scores, key=lambda i: (-scores[i], i))[offset:offset + limit]
    if not ids:
        return []
    rows = {r["id"]: r for r in conn.execute(
        f"SELECT {COLUMNS} FROM message_summaries WHERE id IN ({','.join('?' * len(ids))})", ids)}
    out = []
    for i in ids:
        if i in rows:
            s = row_to_summary(rows[i])
            s["score"] = round(scores[i], 6)
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

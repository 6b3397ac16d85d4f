"""Turns: capture (idempotent, atomic), lexical search, time navigation, read cursors.

Every function takes the connection and runs on the database's worker thread.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from pps_turns import forgotten_ack
from pps_turns import tombstones as turn_tombstones

from pps_core.errors import Conflict

from .db import Tx, loads

COLUMNS = "id, message_id, content, author_name, channel, session_id, created_at, metadata, summary_id"


def row_to_turn(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"], "message_id": row["message_id"], "content": row["content"],
        "author_name": row["author_name"], "channel": row["channel"], "session_id": row["session_id"],
        "created_at": row["created_at"], "metadata": loads(row["metadata"]), "summary_id": row["summary_id"],
    }


def columns_to_turn(row: sqlite3.Row) -> dict[str, Any]:
    """:func:`row_to_turn` of a row selected as ``SELECT {COLUMNS}``, by position (half the cost of looking each
    column up by name: the startup package reads every unsummarized turn)."""
    return {"id": row[0], "message_id": row[1], "content": row[2], "author_name": row[3], "channel": row[4],
            "session_id": row[5], "created_at": row[6], "metadata": loads(row[7]), "summary_id": row[8]}


def _ack(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "message_id": row["message_id"], "created_at": row["created_at"],
            "channel": row["channel"]}


def store(conn: sqlite3.Connection, turns: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict]]:
    """Store turns in one transaction. Returns (acks in input order, newly stored turns).

    ``created_at`` must already be canonical (the operations layer makes it so).

    A turn whose ``message_id`` is already stored, or that was stored without one and comes back with one (the
    same channel, author, time and content: :func:`pps_turns.turn_digest`), stores nothing and answers as the first
    did; one with a tombstone (:func:`pps_turns.tombstones`) stores nothing and is acked as forgotten.
    """
    acks: list[dict[str, Any]] = []
    new: list[dict[str, Any]] = []
    with Tx(conn):
        for t in turns:
            if t.get("message_id") is not None:
                row = conn.execute(f"SELECT {COLUMNS} FROM messages WHERE message_id = ?",
                                   (t["message_id"],)).fetchone()
                if row is not None:
                    acks.append(_ack(row))
                    continue
            marks = turn_tombstones(t)
            if conn.execute(f"SELECT 1 FROM forgotten_message_ids WHERE digest IN ({','.join('?' * len(marks))})",
                            marks).fetchone():
                acks.append(forgotten_ack(t))
                continue
            row = None if t.get("message_id") is None else conn.execute(
                # by its time (the planner would walk the message_id index over every turn stored without one)
                f"SELECT {COLUMNS} FROM messages INDEXED BY idx_messages_created WHERE created_at = ? AND "
                "channel = ? AND author_name = ? AND content = ? AND message_id IS NULL ORDER BY id LIMIT 1",
                (t["created_at"], t["channel"], t["author_name"], t["content"])).fetchone()
            if row is not None:  # the same turn, stored without an id, back with one (an export's, an importer's)
                acks.append(_ack(row))
                continue
            cur = conn.execute(
                "INSERT INTO messages (message_id, content, author_name, channel, session_id, created_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (t.get("message_id"), t["content"], t["author_name"], t["channel"], t.get("session_id"),
                 t["created_at"], json.dumps(t.get("metadata") or {}, ensure_ascii=False)),
            )
            turn = {"id": cur.lastrowid, "message_id": t.get("message_id"), "content": t["content"],
                    "author_name": t["author_name"], "channel": t["channel"], "session_id": t.get("session_id"),
                    "created_at": t["created_at"], "metadata": t.get("metadata") or {}, "summary_id": None}
            ack = {k: turn[k] for k in ("id", "message_id", "created_at", "channel")}
            inside = flag_spans(conn, t["created_at"])
            if inside:
                ack["inside_summaries"] = inside
            acks.append(ack)
            new.append(turn)
    return acks, new


def flag_spans(conn: sqlite3.Connection, created_at: str) -> list[int]:
    """Summaries whose time span strictly contains ``created_at`` (a backfilled turn lands inside them): they
    are flagged ``rewrite = 'backfill'`` (unless flagged already) and their ids returned. The turn itself stays
    unsummarized, so it shows in its place in time and is the first handed out to summarize."""
    # from the span-end index: a new turn (the usual case) is past every summary's end, so this reads nothing;
    # a scan of all summaries here cost every capture O(history) (issue 19)
    ids = [r[0] for r in conn.execute("SELECT id FROM message_summaries INDEXED BY idx_summaries_span "
                                      "WHERE time_span_end > ? AND time_span_start < ? ORDER BY id",
                                      (created_at, created_at))]
    if ids:
        conn.execute(f"UPDATE message_summaries SET rewrite = 'backfill' WHERE rewrite IS NULL AND id IN "
                     f"({','.join('?' * len(ids))})", ids)
    return ids


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Kept by triggers (schema v3): reading them costs the same at 10 turns and at 10 million."""
    c = dict(conn.execute("SELECT name, n FROM counters WHERE name IN ('messages', 'unsummarized', 'uningested')"))
    cursors = conn.execute("SELECT COUNT(*) FROM read_cursors").fetchone()[0]  # one row per reader: small
    return {"total": c["messages"], "unsummarized": c["unsummarized"], "uningested": c["uningested"],
            "cursors": cursors}


def unsummarized_count(conn: sqlite3.Connection, channel: str | None = None) -> int:
    if channel:  # the partial index holds only unsummarized turns
        return conn.execute("SELECT COUNT(*) FROM messages INDEXED BY idx_messages_unsummarized "
                            "WHERE summary_id IS NULL AND channel = ?",
                            (channel,)).fetchone()[0]
    return conn.execute("SELECT n FROM counters WHERE name = 'unsummarized'").fetchone()[0]


def unsummarized(conn: sqlite3.Connection, limit: int | None, offset: int = 0, *, oldest_first: bool = False,
                 channel: str | None = None) -> list[dict[str, Any]]:
    """Unsummarized turns. Pages count from the newest (offset 0 = newest) unless ``oldest_first``.

    Either way the page comes back in chronological order: by (created_at, id), so a backfilled or imported
    turn (old time, new id) takes its place in time (from ``idx_messages_unsummarized_time``).
    """
    where = "summary_id IS NULL" + (" AND channel = ?" if channel else "")
    args: list[Any] = [channel] if channel else []
    order = "ASC" if oldest_first else "DESC"
    sql = f"SELECT {COLUMNS} FROM messages WHERE {where} ORDER BY created_at {order}, id {order} LIMIT ? OFFSET ?"
    rows = conn.execute(sql, [*args, -1 if limit is None else limit, offset]).fetchall()
    turns = [columns_to_turn(r) for r in rows]
    if not oldest_first:
        turns.reverse()
    return turns


def newest(conn: sqlite3.Connection, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT {COLUMNS} FROM messages ORDER BY created_at DESC, id DESC LIMIT ?",
                        (limit,)).fetchall()
    return [row_to_turn(r) for r in reversed(rows)]


def since(conn: sqlite3.Connection, ts: str, limit: int) -> tuple[list[dict[str, Any]], bool]:
    rows = conn.execute(f"SELECT {COLUMNS} FROM messages WHERE created_at >= ? ORDER BY created_at, id LIMIT ?",
                        (ts, limit + 1)).fetchall()
    return [row_to_turn(r) for r in rows[:limit]], len(rows) > limit


def around(conn: sqlite3.Connection, ts: str, before: int, after: int) -> tuple[list[dict], list[dict]]:
    """``before`` turns before ``ts`` and ``after`` from it; a side that runs out lends to the other."""
    total = before + after
    b = conn.execute(f"SELECT {COLUMNS} FROM messages WHERE created_at < ? ORDER BY created_at DESC, id DESC "
                     "LIMIT ?", (ts, total)).fetchall()
    a = conn.execute(f"SELECT {COLUMNS} FROM messages WHERE created_at >= ? ORDER BY created_at, id LIMIT ?",
                     (ts, total)).fetchall()
    if len(b) < before:
        after += before - len(b)
    if len(a) < after:
        before += after - len(a)
    b, a = b[:before], a[:after]
    return [row_to_turn(r) for r in reversed(b)], [row_to_turn(r) for r in a]


def by_ids(conn: sqlite3.Connection, ids: list[int]) -> list[dict[str, Any]]:
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT {COLUMNS} FROM messages WHERE id IN ({marks})", ids).fetchall()
    by = {r["id"]: row_to_turn(r) for r in rows}
    return [by[i] for i in ids if i in by]


# -- graph ingestion state (one per turn) -----------------------------------------------------


def pending_ingestion(conn: sqlite3.Connection, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT {COLUMNS} FROM messages WHERE ingested_at IS NULL ORDER BY id LIMIT ?",
                        (limit,)).fetchall()
    return [row_to_turn(r) for r in rows]


def mark_ingested(conn: sqlite3.Connection, ids: list[int]) -> int:
    if not ids:
        return 0
    with Tx(conn):
        marks = ",".join("?" * len(ids))
        return conn.execute(f"UPDATE messages SET ingested_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') "
                            f"WHERE ingested_at IS NULL AND id IN ({marks})", ids).rowcount


# -- read cursors (per consumer, in the same transaction as the read) --------------------------


def poll(conn: sqlite3.Connection, consumer: str, channel: str | None, limit: int,
         *, newest_first_preview: bool = False) -> dict[str, Any]:
    """Unread turns from channels other than ``channel`` since the consumer's cursor; advances it.

    A new consumer starts at "now": nothing old is reported as new. ``limit`` bounds what is
    returned; the rest is counted and stays unread, unless ``newest_first_preview`` (ambient recall),
    which shows the newest ``limit`` by time, counts the older and marks all read.

    "Unread" is by arrival (the cursor is an id: a backfilled turn is news to a reader, whatever its
    time); what is shown is in time order (created_at, id). A page of a long backlog is the next ``limit``
    arrivals, sorted by time.
    """
    with Tx(conn):
        row = conn.execute("SELECT last_id FROM read_cursors WHERE consumer_key = ?", (consumer,)).fetchone()
        top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0]
        if row is None:
            conn.execute("INSERT INTO read_cursors (consumer_key, last_id, updated_at) VALUES (?, ?, "
                         "strftime('%Y-%m-%dT%H:%M:%fZ','now'))", (consumer, top))
            return {"consumer_key": consumer, "new_consumer": True, "unread_total": 0, "turns": [],
                    "remaining": 0, "cursor": top}
        last = row["last_id"]
        other = "channel != ?" if channel else "1"
        args: list[Any] = [channel] if channel else []
        total = conn.execute(f"SELECT COUNT(*) FROM messages WHERE id > ? AND id <= ? AND {other}",
                             [last, top, *args]).fetchone()[0]
        oldest = None
        if newest_first_preview:
            rows = conn.execute(f"SELECT {COLUMNS} FROM messages WHERE id > ? AND id <= ? AND {other} "
                                "ORDER BY created_at DESC, id DESC LIMIT ?", [last, top, *args, limit]).fetchall()[::-1]
            if total > len(rows):
                oldest = conn.execute(f"SELECT MIN(created_at) FROM messages WHERE id > ? AND id <= ? AND {other}",
                                      [last, top, *args]).fetchone()[0]
            cursor = top
        else:
            rows = conn.execute(f"SELECT {COLUMNS} FROM messages WHERE id > ? AND id <= ? AND {other} "
                                "ORDER BY id LIMIT ?", [last, top, *args, limit]).fetchall()
            cursor = top if len(rows) >= total else rows[-1]["id"]
        conn.execute("UPDATE read_cursors SET last_id = ?, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') "
                     "WHERE consumer_key = ? AND last_id = ?", (cursor, consumer, last))
        if conn.execute("SELECT changes()").fetchone()[0] != 1:
            raise Conflict(f"consumer {consumer!r} was read concurrently; poll again")
        turns = sorted((row_to_turn(r) for r in rows), key=lambda t: (t["created_at"], t["id"]))
    return {"consumer_key": consumer, "new_consumer": False, "unread_total": total, "turns": turns,
            "remaining": total - len(turns) if not newest_first_preview else 0, "cursor": cursor,
            "oldest_unread_at": oldest}


# -- forgetting (ids, time, who are logged; never content) --------------------------------------


def in_range(conn: sqlite3.Connection, channel: str, since: str, until: str) -> list[int]:
    """Ids of turns in ``channel`` (or under it: 'terminal' = 'terminal:*') with since <= created_at < until."""
    rows = conn.execute("SELECT id FROM messages WHERE created_at >= ? AND created_at < ? AND "
                        "(channel = ? OR substr(channel, 1, ?) = ?) ORDER BY created_at, id",
                        (since, until, channel, len(channel) + 1, channel + ":")).fetchall()
    return [r[0] for r in rows]


def forget(conn: sqlite3.Connection, ids: list[int], who: str, how: str, owed: list[str] | None = None) -> dict[str, Any]:
    """Delete turns for good, in one transaction: the row, its FTS entry and vector (trigger, cascade); every
    summary that covered one (its text, FTS entry and vector), the turns it still covered going back to the
    backlog; authors nobody speaks as any more; the tombstones of each turn (what it is, and its message id). A
    forget_log row records ids, time and who. Then the full-text indexes are merged (old segments still held the
    words) and, with secure_delete, every freed page is zeroed and the WAL checkpointed, so no copy of the file (a
    backup) holds the text. With ``owed`` (copies that must still forget them), an owed forget row in the same
    transaction keeps their ids, message ids and texts until those copies confirm (:func:`settle_forget`); the WAL
    is then truncated when the last one confirms (until then the texts are in the file anyway)."""
    ids = sorted(set(ids))
    kept: dict[int, tuple[str, str | None]] = {}
    owed_id = None
    found: list[int] = []
    covering: set[int] = set()
    authors: set[str] = set()
    tombstones: list[str] = []
    returned = covered_and_gone = 0
    previous = conn.execute("PRAGMA secure_delete").fetchone()[0]
    conn.execute("PRAGMA secure_delete = ON")
    try:
        with Tx(conn):
            for k in range(0, len(ids), 500):
                chunk = ids[k:k + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(f"SELECT id, summary_id, author_name, message_id, channel, created_at, content "
                                    f"FROM messages WHERE id IN ({marks})", chunk).fetchall()
                if owed:
                    kept.update((r[0], (r[6], r[3])) for r in rows)
                found += [r[0] for r in rows]
                covering.update(r[1] for r in rows if r[1] is not None)
                covered_and_gone += sum(1 for r in rows if r[1] is not None)
                authors.update(r[2] for r in rows)
                tombstones += [d for r in rows for d in turn_tombstones({
                    "author_name": r[2], "message_id": r[3], "channel": r[4], "created_at": r[5], "content": r[6]})]
            summaries = sorted(covering)
            for k in range(0, len(summaries), 500):
                chunk = summaries[k:k + 500]
                marks = ",".join("?" * len(chunk))
                returned += conn.execute(f"UPDATE messages SET summary_id = NULL WHERE summary_id IN ({marks})",
                                         chunk).rowcount
            for k in range(0, len(found), 500):
                chunk = found[k:k + 500]
                conn.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            for k in range(0, len(summaries), 500):
                chunk = summaries[k:k + 500]
                conn.execute(f"DELETE FROM message_summaries WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            conn.executemany("INSERT OR IGNORE INTO forgotten_message_ids (digest) VALUES (?)",
                             [(d,) for d in tombstones])
            conn.executemany("DELETE FROM authors WHERE name = ? AND NOT EXISTS "
                             "(SELECT 1 FROM messages WHERE author_name = ?)", [(a, a) for a in authors])
            if found:
                conn.execute("INSERT INTO forget_log (who, how, turn_ids, summary_ids) VALUES (?, ?, ?, ?)",
                             (who, how, json.dumps(sorted(found)), json.dumps(summaries)))
            if found and owed:
                order = sorted(kept)
                owed_id = conn.execute(
                    "INSERT INTO owed_forgets (who, turn_ids, message_ids, texts, copies) VALUES (?, ?, ?, ?, ?)",
                    (who, json.dumps(order), json.dumps([kept[i][1] for i in order if kept[i][1] is not None],
                                                        ensure_ascii=False),
                     json.dumps([kept[i][0] for i in order], ensure_ascii=False), json.dumps(list(owed)))).lastrowid
        if found:
            conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            if summaries:
                conn.execute("INSERT INTO summaries_fts(summaries_fts) VALUES ('optimize')")
            if owed_id is None:  # else the owed forget, texts and all, is still here: settling it checkpoints
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.execute(f"PRAGMA secure_delete = {int(previous)}")
    return {"forgotten": sorted(found), "not_found": sorted(set(ids) - set(found)),
            "summaries_removed": summaries, "returned_to_backlog": returned - covered_and_gone, "owed": owed_id}


def owed_forgets(conn: sqlite3.Connection, texts: bool = False) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT id, forgotten_at, who, turn_ids, message_ids, copies{', texts' if texts else ''} "
                        "FROM owed_forgets ORDER BY id").fetchall()
    out = []
    for r in rows:
        item = {"id": r[0], "forgotten_at": r[1], "who": r[2], "turn_ids": json.loads(r[3]),
                "message_ids": json.loads(r[4]), "copies": json.loads(r[5])}
        if texts:
            item["texts"] = json.loads(r[6])
        out.append(item)
    return out


def settle_forget(conn: sqlite3.Connection, owed_id: int, confirmed: list[str]) -> list[str]:
    """Strike confirmed copies off an owed forget; the last one deletes the row, its freed pages zeroed and the
    WAL checkpointed (no copy of the file keeps the texts)."""
    previous = conn.execute("PRAGMA secure_delete").fetchone()[0]
    conn.execute("PRAGMA secure_delete = ON")
    try:
        with Tx(conn):
            row = conn.execute("SELECT copies FROM owed_forgets WHERE id = ?", (owed_id,)).fetchone()
            if row is None:
                return []
            left = [c for c in json.loads(row[0]) if c not in set(confirmed)]
            if left:
                conn.execute("UPDATE owed_forgets SET copies = ? WHERE id = ?", (json.dumps(left), owed_id))
            else:
                conn.execute("DELETE FROM owed_forgets WHERE id = ?", (owed_id,))
        if not left:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.execute(f"PRAGMA secure_delete = {int(previous)}")
    return left


def save_forget_token(conn: sqlite3.Connection, token_digest: str, query_digest: str, ids: list[int],
                      expires_at: float, now: float) -> None:
    with Tx(conn):
        conn.execute("DELETE FROM forget_tokens WHERE expires_at <= ?", (now,))
        conn.execute("INSERT INTO forget_tokens (digest, query_digest, turn_ids, expires_at) VALUES (?, ?, ?, ?)",
                     (token_digest, query_digest, json.dumps(ids), expires_at))


def take_forget_token(conn: sqlite3.Connection, token_digest: str, query_digest: str, now: float) -> list[int] | None:
    """The ids a confirmation token was issued for, if it is valid for this query; it is used up."""
    with Tx(conn):
        row = conn.execute("DELETE FROM forget_tokens WHERE digest = ? AND query_digest = ? AND expires_at > ? "
                           "RETURNING turn_ids", (token_digest, query_digest, now)).fetchone()
    return json.loads(row[0]) if row else None


def forget_log(conn: sqlite3.Connection, limit: int, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    total = conn.execute("SELECT COUNT(*) FROM forget_log").fetchone()[0]
    rows = conn.execute("SELECT id, forgotten_at, who, how, turn_ids, summary_ids FROM forget_log "
                        "ORDER BY id DESC LIMIT ? OFFSET ?", (limit, offset)).fetchall()
    return total, [{"id": r[0], "forgotten_at": r[1], "who": r[2], "how": r[3], "turn_ids": json.loads(r[4]),
                    "summaries_removed": json.loads(r[5])} for r in rows]


# -- browsing (list_turns, turn_activity): indexes and GROUP BY, never the whole history ---------------------


def list_page(conn: sqlite3.Connection, *, since: str | None, until: str | None, channel: str | None,
              author: str | None, ids: list[int] | None, newest_first: bool, limit: int,
              offset: int) -> tuple[int, list[dict[str, Any]]]:
    clauses, args = [], []
    if since:
        clauses.append("created_at >= ?")
        args.append(since)
    if until:
        clauses.append("created_at < ?")
        args.append(until)
    if channel:
        clauses.append("(channel = ? OR substr(channel, 1, ?) = ?)")
        args += [channel, len(channel) + 1, channel + ":"]
    if author:
        clauses.append("author_name = ? COLLATE NOCASE")
        args.append(author)
    if ids:
        clauses.append(f"id IN ({', '.join('?' * len(ids))})")
        args += ids
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    total = conn.execute(f"SELECT COUNT(*) FROM messages{where}", args).fetchone()[0]
    order = "DESC" if newest_first else "ASC"
    rows = conn.execute(f"SELECT {COLUMNS} FROM messages{where} ORDER BY created_at {order}, id {order} "
                        "LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
    return total, [row_to_turn(r) for r in rows]


def activity(conn: sqlite3.Connection, start: str, end: str, width: int):
    """Turns per (bucket, channel) in [start, end), the backlog before ``start``, turns summarized per bucket."""
    turns = conn.execute(f"SELECT substr(created_at, 1, {int(width)}), channel, COUNT(*) FROM messages "
                         "WHERE created_at >= ? AND created_at < ? GROUP BY 1, 2", (start, end)).fetchall()
    before = conn.execute("SELECT COUNT(*) FROM messages WHERE created_at < ?", (start,)).fetchone()[0]
    summed_before = conn.execute(
        "SELECT COALESCE(SUM(message_count), 0) FROM message_summaries WHERE created_at < ?", (start,)).fetchone()[0]
    summed = conn.execute(f"SELECT substr(created_at, 1, {int(width)}), SUM(message_count) FROM message_summaries "
                          "WHERE created_at >= ? AND created_at < ? GROUP BY 1", (start, end)).fetchall()
    return [tuple(r) for r in turns], before - summed_before, [tuple(r) for r in summed]

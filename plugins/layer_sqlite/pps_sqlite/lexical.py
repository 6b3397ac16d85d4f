"""The lexical half of the turn search on SQLite: FTS5 BM25 candidates, bounded over a long history.

:class:`pps_turns.retriever.Retriever` fuses these with the dense candidates (``SQLiteStore.lexical_turns``).
Functions taking ``conn`` run on the database's worker thread.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any


def author_names(conn: sqlite3.Connection) -> list[str]:
    """Every author's name (kept by a trigger, schema v3: no scan)."""
    return [name for (name,) in conn.execute("SELECT name FROM authors")]


def bm25_scores(conn: sqlite3.Connection, terms: list[str], n: int,
                channel: str | None = None, *, mode: str = "OR", after: int = 0) -> dict[int, float]:
    """Top ``n`` turns by BM25 over their content for an OR (or AND) of ``terms`` (higher is better);
    ``after``: only turns with a higher id."""
    if not terms:
        return {}
    match = "content : (" + f" {mode} ".join('"' + t.replace('"', '""') + '"' for t in terms) + ")"
    sql = ("SELECT messages_fts.rowid AS id, bm25(messages_fts, 1.0, 0.0, 0.0) AS rank FROM messages_fts "
           "WHERE messages_fts MATCH ?")
    args: list[Any] = [match]
    if after > 0:
        sql += " AND messages_fts.rowid > ?"
        args.append(after)
    if channel:
        sql = sql.replace("FROM messages_fts", "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid")
        sql += " AND m.channel = ?"
        args.append(channel)
    sql += " ORDER BY rank LIMIT ?"
    args.append(n)
    return {row[0]: -row[1] for row in conn.execute(sql, args)}


def _phrase(t: str) -> str:
    return '"' + t.replace('"', '""') + '"'


class DocFreq:
    """How many rows of an FTS5 table hold each term (in ``column``), counted up to a cap (enough to order terms by
    selectivity) and cached until the table grows by a tenth. A count costs at most ``cap`` postings."""

    def __init__(self, table: str = "messages_fts", column: str = "content", size: int = 20_000) -> None:
        self.table, self.column, self.size = table, column, size
        self._seen: dict[tuple[str, int], int] = {}
        self._epoch = -1

    def __call__(self, conn: sqlite3.Connection, term: str, cap: int, total: int) -> int:
        epoch = int(math.log(max(total, 1), 1.1))
        if epoch != self._epoch or len(self._seen) > self.size:
            self._seen.clear()
            self._epoch = epoch
        key = (term, cap)
        if key not in self._seen:
            self._seen[key] = conn.execute(
                f"SELECT COUNT(*) FROM (SELECT rowid FROM {self.table} WHERE {self.table} MATCH ? LIMIT ?)",
                (f"{self.column} : " + _phrase(term), cap)).fetchone()[0]
        return self._seen[key]


def bounded(conn: sqlite3.Connection, terms: list[str], total: int, budget: int, df: DocFreq, rank,
            top_id: int) -> dict[int, float]:
    """The bounded candidate pass of :func:`bm25_bounded` over any FTS5 table: ``rank(terms, mode, after)``
    returns {rowid: BM25} (higher is better) for an OR/AND of ``terms`` over rows with a rowid above ``after``."""
    if not terms:
        return {}
    if not budget or total <= budget:
        return rank(terms, "OR", 0)
    counts = {t: df(conn, t, budget + 1, total) for t in terms}
    if sum(counts.values()) <= budget:
        return rank(terms, "OR", 0)
    held = [t for t in terms if counts[t]]  # a term in no row adds no row (and would empty the AND below)
    chosen, used = [], 0
    for t in sorted(held, key=lambda t: counts[t]):
        if used + counts[t] > budget:
            break
        chosen.append(t)
        used += counts[t]
    if chosen:
        out = rank(chosen, "OR", 0)
    else:  # every term is common: the newest rows that fit the budget
        out = rank(held, "OR", top_id - max(budget // len(terms), 1))
    if len(held) > 1:  # the rows holding every term that some row holds
        for i, s in rank(held, "AND", 0).items():
            out[i] = max(out.get(i, 0.0), s)
    return out


def bm25_bounded(conn: sqlite3.Connection, terms: list[str], n: int, channel: str | None, budget: int,
                 df: DocFreq) -> dict[int, float]:
    """:func:`bm25_scores`, ranking at most about ``budget`` postings however long the history.

    FTS5 scores every turn an OR query matches before it can sort, so a question with a common word ranks a
    large share of history. When the terms' turns add up to more than ``budget``, the pass is bounded: the most
    selective terms whose postings fit the budget are ranked over all history (their BM25 contributions are
    exact), every term together (AND) adds the turns holding all of them with their full score, and when even
    the rarest term is common, the OR of all terms is ranked over the newest slice of history that fits the
    budget. A term no turn holds (a typo, a word never said) is left out of all three: it would choose no turn
    and empty the AND. Below the budget (every LoCoMo conversation, any entity's first months) the result is the
    exhaustive one.
    """
    if not terms:
        return {}
    total = conn.execute("SELECT n FROM counters WHERE name = 'messages'").fetchone()[0]
    top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0] if total > budget else 0
    return bounded(conn, terms, total, budget, df,
                   lambda ts, mode, after: bm25_scores(conn, ts, n, channel, mode=mode, after=after), top)

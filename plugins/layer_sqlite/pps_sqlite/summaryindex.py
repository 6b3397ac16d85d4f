"""Summary vectors on SQLite: the ``summary_vectors`` table and one numpy matrix of them.

Summaries are few (one per ~50 turns); the turn domain (``pps_turns.retriever.SummarySearch``) computes missing
vectors at the next search and fuses the cosines with BM25. Functions taking ``conn`` run on the database's
worker thread (writes) or a reader thread (reads).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Any

from . import summaries
from .db import Tx

log = logging.getLogger("pps.sqlite")


def _missing(conn: sqlite3.Connection, model: str, limit: int, after: int = 0) -> list[tuple[int, str]]:
    return conn.execute("SELECT s.id, s.summary_text FROM message_summaries s WHERE s.id > ? AND NOT EXISTS "
                        "(SELECT 1 FROM summary_vectors v WHERE v.summary_id = s.id AND v.model = ?) "
                        "ORDER BY s.id LIMIT ?", (after, model, limit)).fetchall()


def _missing_upto(conn: sqlite3.Connection, model: str, limit: int, after: int) -> tuple[list[tuple[int, str]], int]:
    """:func:`_missing` above ``after``, and the highest summary id when it looked (every summary up to it has a
    vector when fewer than ``limit`` come back), so a search does not re-check every summary each time."""
    top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM message_summaries").fetchone()[0]
    return _missing(conn, model, limit, after), top


def _write(conn: sqlite3.Connection, model: str, rows: list[tuple[int, bytes]]) -> None:
    with Tx(conn):
        conn.executemany("INSERT OR REPLACE INTO summary_vectors (summary_id, model, vector) VALUES (?, ?, ?)",
                         [(i, model, b) for i, b in rows])


def _load(conn: sqlite3.Connection, model: str) -> list[tuple[int, bytes]]:
    return conn.execute("SELECT summary_id, vector FROM summary_vectors WHERE model = ? ORDER BY summary_id",
                        (model,)).fetchall()


class SummaryMatrix:
    """Summary vectors of one model as one numpy matrix (summaries are few), reloaded after a write.

    Searches on several reader threads share it: a matrix loaded while a write invalidated it is used by that
    search only, never kept (the write's generation differs), so no search keeps an older matrix."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.ids = None
        self.matrix = None
        self._lock = threading.Lock()
        self._generation = 0

    def invalidate(self) -> None:
        with self._lock:
            self.ids = None
            self._generation += 1

    def similarities(self, conn: sqlite3.Connection, model: str, qvec, n: int) -> dict[int, float]:
        import numpy as np

        with self._lock:
            ids, matrix, generation = self.ids, self.matrix, self._generation
            if self.model != model:
                ids = None
        if ids is None:  # loaded after the generation was read: at least as new as the last invalidation
            rows = _load(conn, model)
            ids = np.asarray([r[0] for r in rows], dtype=np.int64)
            matrix = (np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]) if rows
                      else np.empty((0, 0), dtype=np.float32))
            with self._lock:
                if self._generation == generation:
                    self.model, self.ids, self.matrix = model, ids, matrix
        if not len(ids):
            return {}
        sims = matrix @ np.asarray(qvec, dtype=np.float32)
        top = np.argsort(-sims)[:n]
        return {int(ids[i]): float(sims[i]) for i in top}


def _by_ids(conn: sqlite3.Connection, ids: list[int]) -> list[dict[str, Any]]:
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT {summaries.COLUMNS} FROM message_summaries WHERE id IN ({marks})", ids).fetchall()
    return [summaries.row_to_summary(r) for r in rows]

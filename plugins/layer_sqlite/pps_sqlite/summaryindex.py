"""Hybrid summary search: FTS5 BM25 fused with summary vectors when an embedder is loaded.

Summaries are few (one per ~50 turns), so their vectors live in ``summary_vectors`` and in one
numpy matrix; missing vectors (a new summary, or summaries from before the embedder) are computed
at the next search, in batches. Without an embedder, search is BM25 alone.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

from . import summaries
from .db import Database, Tx

log = logging.getLogger("pps.sqlite")

BM25_WEIGHT = 0.6
DENSE_WEIGHT = 0.4
#: A summary found by meaning alone must be at least this similar to the question.
DENSE_FLOOR = 0.25
CANDIDATES = 50
EMBED_BATCH = 32


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


class SummaryIndex:
    def __init__(self, memory, db: Database) -> None:
        self.memory = memory
        self.db = db
        self._model: str | None = None
        self._ids = None
        self._matrix = None
        self._warned = False
        self._floor: tuple[str, int] = ("", 0)  # (model, every summary up to this id has its vector)

    def _embedder(self):
        try:
            return self.memory.embedder
        except Exception as exc:  # a broken embedder must not break search
            self._warn(exc)
            return None

    def _warn(self, exc: BaseException) -> None:
        if not self._warned:
            log.warning("summary vectors unavailable, searching lexically: %s: %s", type(exc).__name__, exc)
            self._warned = True

    async def _refresh(self, emb) -> bool:
        import numpy as np

        model = f"{emb.name}|summary"
        while True:
            after = self._floor[1] if self._floor[0] == model else 0
            todo, top = await self.db.run(_missing_upto, self.db.conn, model, EMBED_BATCH, after)
            if not todo:
                self._floor = (model, max(after, top))
                break
            vecs = await asyncio.to_thread(emb.embed, [text for _i, text in todo])
            blobs = [np.asarray(v, dtype=np.float32).tobytes() for v in vecs]
            await self.db.run(_write, self.db.conn, model, [(i, b) for (i, _t), b in zip(todo, blobs, strict=True)])
            self._ids = None
        if self._ids is None or self._model != model:
            rows = await self.db.run(_load, self.db.conn, model)
            self._model = model
            self._ids = np.asarray([r[0] for r in rows], dtype=np.int64)
            self._matrix = (np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]) if rows
                            else np.empty((0, 0), dtype=np.float32))
        return len(self._ids) > 0

    async def search(self, query: str, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        lexical = await self.db.run(summaries.search, self.db.conn, query, CANDIDATES, 0)
        emb = self._embedder()
        dense: dict[int, float] = {}
        if emb is not None:
            try:
                if await self._refresh(emb):
                    import numpy as np

                    qvec = (await asyncio.to_thread(emb.embed, [query]))[0]
                    sims = self._matrix @ np.asarray(qvec, dtype=np.float32)
                    top = np.argsort(-sims)[:CANDIDATES]
                    dense = {int(self._ids[i]): float(sims[i]) for i in top}
            except Exception as exc:
                self._warn(exc)
                dense = {}
        return await fuse(lexical, dense, limit, offset,
                          lambda ids: self.db.run(_by_ids, self.db.conn, ids))


async def fuse(lexical: list[dict[str, Any]], dense: dict[int, float], limit: int, offset: int,
               by_ids) -> list[dict[str, Any]]:
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
        s = dict(rows[sid])
        s["score"] = round(fused[sid], 6)
        s["signals"] = {**signals[sid], "fused": s["score"]}
        out.append(s)
    return out


def _by_ids(conn: sqlite3.Connection, ids: list[int]) -> list[dict[str, Any]]:
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT {summaries.COLUMNS} FROM message_summaries WHERE id IN ({marks})", ids).fetchall()
    return [summaries.row_to_summary(r) for r in rows]

"""The fused turn search and the hybrid summary search of pps_sqlite, over PostgreSQL.

Turns: the same query parsing and fusion (``pps_sqlite.retrieval``), BM25 from ``textsearch.bm25``, and the
same dense signal: turn vectors stored in pgvector columns, ranked in-process by ``pps_sqlite.turnindex``'s
matrix (which blends each turn's neighbours into a context vector: a per-query scan in SQL cannot do that
cheaply). Each server keeps its own matrix and loads the rows other servers wrote when the row count moves.
Summaries: BM25 fused with a pgvector cosine search (``<=>``) in SQL.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pps_sqlite import retrieval, summaryindex
from pps_sqlite.turnindex import EMBED_BATCH, Retriever, TurnVectors, vector_text

from pps_core.textsearch import content_terms

from .textsearch import bm25

#: Rows loaded again behind the newest id a server has: ids commit out of order across servers.
RELOAD_SLACK = 5000
#: Authors named in questions are re-read this often (this server's own captures reset them at once).
AUTHORS_TTL_S = 30.0


def _vec(v) -> str:
    """A pgvector literal ('[0.1,0.2,...]') from any float sequence."""
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


class PgRetriever(Retriever):
    """``turnindex.Retriever`` with its storage calls on PostgreSQL (``self.db`` is the PostgresStore)."""

    _authors_at = 0.0

    async def _missing(self, model: str, limit: int, after: int = 0) -> list[dict[str, Any]]:
        from .store import COLUMNS, row_to_turn

        rows = await self.db.fetch(
            f"SELECT {COLUMNS} FROM messages m WHERE id > %s AND NOT EXISTS (SELECT 1 FROM message_vectors v "
            "WHERE v.message_id = m.id AND v.model = %s) ORDER BY id LIMIT %s", (after, model, limit))
        return [row_to_turn(r) for r in rows]

    async def _batch(self, emb) -> int:
        model = self._model(emb)
        todo = await self._missing(model, EMBED_BATCH, self._floor)
        if len(todo) < EMBED_BATCH:
            self._pending = False
        if todo:
            try:
                vecs = await asyncio.to_thread(emb.embed, [vector_text(t) for t in todo])
            except BaseException:
                self._pending = True
                raise
            async with self.db.connection() as conn, conn.transaction():
                async with conn.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO message_vectors (message_id, model, embedding) VALUES (%s, %s, %s::vector) "
                        "ON CONFLICT (message_id) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding",
                        [(t["id"], model, _vec(v)) for t, v in zip(todo, vecs, strict=True)])
            self._floor = todo[-1]["id"]
        return len(todo)

    async def _load(self, model: str) -> TurnVectors:
        """The in-process matrix, brought up to date with every server's rows."""
        import numpy as np

        if self.vectors is None or self.vectors.model != model:
            self.vectors = TurnVectors(model)
        vectors = self.vectors
        n = (await self.db.fetch("SELECT count(*) AS n FROM message_vectors WHERE model = %s", (model,)))[0]["n"]
        if n == len(vectors):
            return vectors
        if n < len(vectors):  # vectors were dropped (reindex --full): start again
            vectors = self.vectors = TurnVectors(model)
        for attempt in range(2):
            after = int(vectors.ids[-1]) - RELOAD_SLACK if len(vectors) and attempt == 0 else 0
            rows = await self.db.fetch(
                "SELECT v.message_id, v.embedding::real[] AS e, m.channel FROM message_vectors v "
                "JOIN messages m ON m.id = v.message_id WHERE v.model = %s AND v.message_id > %s "
                "ORDER BY v.message_id", (model, after))
            fresh = [r for r in rows if not vectors.has(r["message_id"])]
            if fresh:
                vectors.add([r["message_id"] for r in fresh], [r["channel"] for r in fresh],
                            [np.asarray(r["e"], dtype=np.float32).tobytes() for r in fresh])
            if len(vectors) >= n:
                break
        return vectors

    async def search(self, query: str, limit: int, offset: int = 0, channel: str | None = None,
                     cfg: retrieval.FusionConfig = retrieval.DEFAULT) -> list[dict[str, Any]]:
        from .store import COLUMNS, row_to_turn

        emb = self._embedder() if cfg.use_dense else None
        qvec = None
        if emb is not None:
            try:
                if self._pending:
                    self._kick()
                qvec = (await asyncio.to_thread(emb.embed, [query]))[0]
            except Exception as exc:
                self._warn(exc)
                qvec = None
        if self._authors is None or time.monotonic() - self._authors_at > AUTHORS_TTL_S:
            self._authors = await self._author_tokens()  # also names another server's new authors
            self._authors_at = time.monotonic()
        q = retrieval.parse_query(query, self._authors, cfg)
        async with self.db.connection() as conn:
            lexical = (await bm25(conn, "messages", q.terms, cfg.candidates, channel, self.db.corpus_stats)
                       if cfg.use_bm25 else {})
        dense, floor = {}, 0.0
        if qvec is not None:
            vectors = await self._load(self._model(emb))
            dense, floor = retrieval.dense_top(vectors.scores(qvec, cfg.context), cfg.candidates,
                                               cfg.dense_floor_rank)
        ids = sorted(set(lexical) | set(dense))
        if not ids:
            return []
        rows = await self.db.fetch(f"SELECT {COLUMNS} FROM messages WHERE id = ANY(%s)", (ids,))
        found = {r["id"]: row_to_turn(r) for r in rows}
        meta = {i: (t["author_name"], t["created_at"], t["channel"],
                    (t["channel"], t["session_id"] or t["created_at"][:10])) for i, t in found.items()}
        ranked = retrieval.fuse_meta(meta, q, lexical, dense, floor, cfg, channel)[offset:offset + limit]
        return [{**found[i], "score": round(s, 6), "signals": sig} for i, s, sig in ranked if i in found]

    async def _author_tokens(self) -> dict[str, str]:
        from pps_core.textsearch import STOP_WORDS, tokens

        out: dict[str, str] = {}
        for r in await self.db.fetch("SELECT DISTINCT author_name FROM messages"):
            toks = tokens(r["author_name"])
            for t in {" ".join(toks), toks[0] if toks else ""} - {""}:
                if t not in STOP_WORDS:
                    out[t] = r["author_name"]
        return out

    async def reindex(self, progress, full: bool) -> dict[str, Any] | None:
        """Embed every turn without a vector (all of them with ``full``), through the background drain."""
        emb = self._embedder()
        if emb is None:
            return {"skipped": "no embedder loaded: turns are searched lexically"}
        model = self._model(emb)
        await self.close()
        dropped = 0
        if full:
            async with self.db.connection() as conn:
                dropped = (await conn.execute("DELETE FROM message_vectors")).rowcount
            self.vectors = None
        self._floor = 0
        self._pending = True
        total = await self._count_missing(model)
        progress(0, total)
        done = await self.drain(progress=lambda k: progress(min(k, total), total))
        out = {"embedded": done, "missing_after": await self._count_missing(model), "model": model}
        if full:
            out["dropped"] = dropped
        return out

    async def _count_missing(self, model: str) -> int:
        return (await self.db.fetch("SELECT count(*) AS n FROM messages m WHERE NOT EXISTS (SELECT 1 FROM "
                                    "message_vectors v WHERE v.message_id = m.id AND v.model = %s)", (model,)))[0]["n"]


class PgSummaryIndex:
    """Summary search: BM25 fused with pgvector cosine, as ``summaryindex.SummaryIndex`` does on SQLite."""

    def __init__(self, memory, store) -> None:
        self.memory = memory
        self.store = store
        self._warned = False

    def _embedder(self):
        try:
            return self.memory.embedder
        except Exception as exc:
            self._warn(exc)
            return None

    def _warn(self, exc: BaseException) -> None:
        if not self._warned:
            summaryindex.log.warning("summary vectors unavailable, searching lexically: %s: %s",
                                     type(exc).__name__, exc)
            self._warned = True

    async def _fill(self, emb, model: str) -> int:
        done = 0
        while True:
            todo = await self.store.fetch(
                "SELECT s.id, s.summary_text FROM message_summaries s WHERE NOT EXISTS (SELECT 1 FROM summary_vectors v "
                "WHERE v.summary_id = s.id AND v.model = %s) ORDER BY s.id LIMIT %s", (model, summaryindex.EMBED_BATCH))
            if not todo:
                return done
            vecs = await asyncio.to_thread(emb.embed, [r["summary_text"] for r in todo])
            async with self.store.connection() as conn, conn.transaction():
                async with conn.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO summary_vectors (summary_id, model, embedding) VALUES (%s, %s, %s::vector) "
                        "ON CONFLICT (summary_id) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding",
                        [(r["id"], model, _vec(v)) for r, v in zip(todo, vecs, strict=True)])
            done += len(todo)

    async def search(self, query: str, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        from .store import SUMMARY_COLUMNS, row_to_summary

        async with self.store.connection() as conn:
            scores = await bm25(conn, "message_summaries", content_terms(query), summaryindex.CANDIDATES,
                                stats=self.store.corpus_stats)
            rows = await (await conn.execute(f"SELECT {SUMMARY_COLUMNS} FROM message_summaries WHERE id = ANY(%s)",
                                             (list(scores),))).fetchall() if scores else []
        by = {r["id"]: row_to_summary(r) for r in rows}
        lexical = [{**by[i], "score": round(s, 6)}
                   for i, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])) if i in by]
        emb = self._embedder()
        dense: dict[int, float] = {}
        if emb is not None:
            try:
                model = f"{emb.name}|summary"
                await self._fill(emb, model)
                qvec = (await asyncio.to_thread(emb.embed, [query]))[0]
                found = await self.store.fetch(
                    "SELECT summary_id, 1 - (embedding <=> %s::vector) AS sim FROM summary_vectors WHERE model = %s "
                    "ORDER BY embedding <=> %s::vector LIMIT %s",
                    (_vec(qvec), model, _vec(qvec), summaryindex.CANDIDATES))
                dense = {r["summary_id"]: float(r["sim"]) for r in found}
            except Exception as exc:
                self._warn(exc)
                dense = {}
        return await summaryindex.fuse(lexical, dense, limit, offset, self.store.summaries_by_ids)

    async def reindex(self, progress, full: bool) -> dict[str, Any] | None:
        emb = self._embedder()
        if emb is None:
            return {"skipped": "no embedder loaded: summaries are searched lexically"}
        model = f"{emb.name}|summary"
        dropped = 0
        if full:
            async with self.store.connection() as conn:
                dropped = (await conn.execute("DELETE FROM summary_vectors")).rowcount
        total = (await self.store.fetch(
            "SELECT count(*) AS n FROM message_summaries s WHERE NOT EXISTS (SELECT 1 FROM summary_vectors v "
            "WHERE v.summary_id = s.id AND v.model = %s)", (model,)))[0]["n"]
        progress(0, total)
        done = await self._fill(emb, model)
        progress(total, total)
        out = {"embedded": done, "model": model}
        if full:
            out["dropped"] = dropped
        return out

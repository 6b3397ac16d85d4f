"""Turn and summary vectors on PostgreSQL: pgvector columns, searched by PostgreSQL.

The turn domain (``pps_turns.retriever``) embeds and fuses; this keeps the vectors and answers the store's dense
calls. Turn similarities: pgvector's HNSW index (one per model, a partial index on ``message_vectors`` over
``embedding::vector(dimension)``, made the first time a model's vectors are written or searched) gives the
nearest ``ANN_OVERFETCH`` x n turns by their own vector (``ORDER BY embedding <=> q LIMIT k``, ``hnsw.ef_search``
set for the query); their context vectors (each turn's vector plus its neighbours', see
:func:`pps_turns.vectors.context_scores`) are scored exactly from the few rows around them, read in binary. No
server holds the entity's vectors: a search allocates what its candidates need and frees it. Summary
similarities are a cosine scan (``<=>``) in SQL (summaries are few).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from psycopg import sql
from psycopg.adapt import Loader
from psycopg.pq import Format

log = logging.getLogger("pps.postgres")

#: Approximate candidates per dense candidate wanted, rescored exactly (as pps_sqlite's index).
ANN_OVERFETCH = 2
#: pgvector's HNSW takes ``vector`` columns of up to this many dimensions; longer vectors are scanned exactly.
HNSW_MAX_DIM = 2000
#: pgvector's ``hnsw.ef_search`` upper bound.
EF_SEARCH_MAX = 1000


def vec(v: Any) -> str:
    """A pgvector literal ('[0.1,0.2,...]') from float32 bytes or any float sequence."""
    import numpy as np

    if isinstance(v, bytes | bytearray | memoryview):
        v = np.frombuffer(v, dtype=np.float32)
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


class VectorBinaryLoader(Loader):
    """pgvector's binary form (int16 dimension, int16 unused, big-endian float4s) as a float32 numpy array:
    no text to parse, no Python float per value."""

    format = Format.BINARY

    def load(self, data: Any) -> Any:
        import numpy as np

        dim = int.from_bytes(bytes(data[:2]), "big")
        return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


def index_name(model: str, dim: int) -> str:
    return "idx_message_vectors_hnsw_" + hashlib.sha1(f"{model}|{dim}".encode()).hexdigest()[:12]


class TurnIndex:
    """The dense side of the PostgreSQL store: an HNSW index per model, queried in SQL."""

    def __init__(self, store: Any) -> None:
        self.store = store
        #: (model, dimension) pairs whose index this process has seen or made
        self.ready: set[tuple[str, int]] = set()
        self.vector_oid: int | None = None

    def forget(self) -> None:
        self.ready.clear()  # vectors were dropped (the index stays, emptied): looked up again at the next use

    async def ensure(self, conn: Any, model: str, dim: int) -> bool:
        """Make the model's HNSW index unless it exists (idempotent across servers: one maker at a time, the
        others find it). False when vectors of this length cannot be indexed (they are scanned exactly)."""
        if dim > HNSW_MAX_DIM:
            return False
        if (model, dim) in self.ready:
            return True
        name = index_name(model, dim)
        exists = await (await conn.execute("SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() "
                                           "AND indexname = %s", (name,))).fetchone()
        if exists is None:
            s = self.store.settings
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("pps-hnsw:" + self.store.schema,))
                log.info("building the HNSW index of %s turn vectors (%d dimensions)", model, dim)
                await conn.execute(sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON message_vectors USING hnsw ((embedding::vector({})) "
                    "vector_cosine_ops) WITH (m = {}, ef_construction = {}) WHERE model = {}").format(
                    sql.Identifier(name), sql.Literal(dim), sql.Literal(s.hnsw_m),
                    sql.Literal(s.hnsw_ef_construction), sql.Literal(model)))
        self.ready.add((model, dim))
        return True

    async def ensure_for(self, model: str, dim: int) -> None:
        if (model, dim) not in self.ready and dim <= HNSW_MAX_DIM:
            async with self.store.connection() as conn:
                await self.ensure(conn, model, dim)

    async def candidates(self, conn: Any, model: str, q: str, dim: int, k: int, channel: str | None) -> list[int]:
        """The ``k`` turns nearest ``q`` by their own vector: from the HNSW index, or (a channel asked for, or
        vectors too long to index) an exact scan in the database."""
        if channel is None and await self.ensure(conn, model, dim):
            ef = min(EF_SEARCH_MAX, max(self.store.settings.hnsw_ef_search, k))
            async with conn.transaction():
                await conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef)))
                # the model and dimension are literals: the planner matches the partial index on them
                rows = await (await conn.execute(sql.SQL(
                    "SELECT message_id FROM message_vectors WHERE model = {m} "
                    "ORDER BY embedding::vector({d}) <=> %s::vector({d}) LIMIT %s").format(
                    m=sql.Literal(model), d=sql.Literal(dim)), (q, k))).fetchall()
        elif channel is None:
            rows = await (await conn.execute(
                "SELECT message_id FROM message_vectors WHERE model = %s ORDER BY embedding <=> %s::vector LIMIT %s",
                (model, q, k))).fetchall()
        else:  # the index knows no channel: its k nearest could all be elsewhere
            rows = await (await conn.execute(
                "SELECT v.message_id FROM message_vectors v JOIN messages m ON m.id = v.message_id "
                "WHERE v.model = %s AND m.channel = %s ORDER BY v.embedding <=> %s::vector LIMIT %s",
                (model, channel, q, k))).fetchall()
        return [r["message_id"] for r in rows]

    async def similarities(self, model: str, qvec: Any, n: int, context: float, channel: str | None = None):
        """(ids, cosines) of the context vectors of the nearest candidates and the turns next to them."""
        import numpy as np
        from psycopg.types import TypeInfo
        from pps_turns.vectors import context_scores, neighbourhood

        qvec = np.asarray(qvec, dtype=np.float32)
        q = vec(qvec)
        async with self.store.connection() as conn:
            ids = await self.candidates(conn, model, q, len(qvec), n * ANN_OVERFETCH, channel)
            if not ids:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
            if self.vector_oid is None:
                info = await TypeInfo.fetch(conn, "vector")
                if info is None:
                    raise RuntimeError("the vector type of pgvector is missing")
                self.vector_oid = info.oid
            conn.adapters.register_loader(self.vector_oid, VectorBinaryLoader)
            want = [i for i in neighbourhood(ids, context) if i > 0]
            cur = conn.cursor(binary=True)
            await cur.execute("SELECT v.message_id, v.embedding, m.channel FROM message_vectors v "
                              "JOIN messages m ON m.id = v.message_id WHERE v.model = %s AND v.message_id = ANY(%s) "
                              "ORDER BY v.message_id", (model, want))
            rows = await cur.fetchall()
        rows = [r for r in rows if len(r["embedding"]) == len(qvec)]
        if not rows:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        codes: dict[str, int] = {}
        return context_scores(ids, [r["message_id"] for r in rows], np.stack([r["embedding"] for r in rows]),
                              [codes.setdefault(r["channel"], len(codes)) for r in rows], qvec, context)

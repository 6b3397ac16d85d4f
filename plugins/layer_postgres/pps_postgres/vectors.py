"""The turn store's vectors on PostgreSQL (pgvector): the backlog of turns without one (by set membership, claimed
once across a fleet), writing them, similarities through the HNSW indexes (:mod:`.retrieval`), and the summaries'.
A part of :class:`~pps_postgres.store.PostgresStore`, which gives it ``fetch``, ``connection`` and ``dense``."""

from __future__ import annotations

import struct
from contextlib import asynccontextmanager
from typing import Any

from psycopg.adapt import Dumper
from psycopg.pq import Format

from .retrieval import HNSW_MAX_DIM, index_name, vec
from .rows import COLUMNS, row_to_turn

#: The ids of turns without a vector of a model (args: limit, model, limit, model, limit, limit): the backlog, and
#: vectors of another model (each side of ``<>`` a range of the (model, message_id) index).
MISSING_IDS = """
SELECT message_id FROM (
    (SELECT message_id FROM vector_backlog ORDER BY message_id LIMIT %s)
    UNION ALL (SELECT message_id FROM message_vectors WHERE model < %s ORDER BY model, message_id LIMIT %s)
    UNION ALL (SELECT message_id FROM message_vectors WHERE model > %s ORDER BY model, message_id LIMIT %s)
) missing ORDER BY message_id LIMIT %s
"""

#: Turns without a vector of a model, claimed for this transaction (args: limit, model, limit, model, limit): rows
#: another server is embedding are skipped (``{skip}``: SKIP LOCKED), or waited for (``{skip}`` empty).
CLAIM_MISSING = """
WITH a AS (SELECT message_id FROM vector_backlog ORDER BY message_id LIMIT %s FOR UPDATE {skip}),
b AS (SELECT message_id FROM message_vectors WHERE model < %s ORDER BY model, message_id LIMIT %s FOR UPDATE {skip}),
c AS (SELECT message_id FROM message_vectors WHERE model > %s ORDER BY model, message_id LIMIT %s FOR UPDATE {skip})
SELECT message_id FROM a UNION SELECT message_id FROM b UNION SELECT message_id FROM c
"""


class _Vector:
    """A vector sent in pgvector's binary form (dimension, a reserved int16, big-endian float4s): 70x cheaper to
    make than its text literal (0.17 ms per 384-dimension vector, a third of a drain's time), and exact."""

    __slots__ = ("data",)

    def __init__(self, v: Any) -> None:
        import numpy as np

        a = np.frombuffer(v, dtype=np.float32) if isinstance(v, bytes | bytearray | memoryview) else \
            np.asarray(v, dtype=np.float32)
        self.data = struct.pack(">HH", len(a), 0) + a.astype(">f4").tobytes()


class _VectorDumper(Dumper):
    format = Format.BINARY  # no oid: the parameter's type is the ``::vector`` it is cast to

    def dump(self, obj: _Vector) -> bytes:
        return obj.data


async def _keep_turn_vectors(conn, model, turns, vectors) -> None:
    """The turns' vectors of ``model`` stored (or replaced) and the turns out of the backlog, on ``conn``."""
    async with conn.cursor() as cur:
        cur.adapters.register_dumper(_Vector, _VectorDumper)
        await cur.executemany(
            "INSERT INTO message_vectors (message_id, model, embedding) VALUES (%s, %s, %b::vector) "
            "ON CONFLICT (message_id) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding",
            [(t["id"], model, _Vector(v)) for t, v in zip(turns, vectors, strict=True)])
    await conn.execute("DELETE FROM vector_backlog WHERE message_id = ANY(%s)", ([t["id"] for t in turns],))


class TurnVectors:
    """The vector methods of the turn store contract (``turns_missing_vectors`` ... ``summary_similarities``)."""

    async def turns_missing_vectors(self, model, limit, after):
        """By set membership, never by a mark (ids commit out of order across servers): the turns in
        ``vector_backlog`` (no vector at all) and those whose vector is of another model; ``after`` is not read."""
        rows = await self.fetch(f"SELECT {COLUMNS} FROM messages WHERE id IN ({MISSING_IDS}) ORDER BY id LIMIT %s",
                                (limit, model, limit, model, limit, limit, limit))
        return [row_to_turn(r) for r in rows], 0

    async def write_turn_vectors(self, model, turns, vectors):
        if vectors:  # the model's HNSW index first, so it grows with the rows (made once, on an empty table)
            await self.dense.ensure_for(model, len(vectors[0]) // 4)
        async with self.connection() as conn, conn.transaction():
            await _keep_turn_vectors(conn, model, turns, vectors)

    @asynccontextmanager
    async def claim_turns_missing_vectors(self, model, limit, wait=False):
        """Turns without a vector of ``model``, claimed (issue 37: each turn embedded once across a fleet):
        yields ``(turns, write)``; ``await write(vectors)`` keeps their vectors. The rows stay locked in one
        transaction until the block ends: another server's claim skips them (``wait``: waits for them, then finds
        them done; a search that reads its writes). A failure inside leaves them in the backlog."""
        query = CLAIM_MISSING.format(skip="" if wait else "SKIP LOCKED")
        async with self.connection() as conn, conn.transaction():
            rows = await (await conn.execute(query, (limit, model, limit, model, limit))).fetchall()
            ids = sorted(r["message_id"] for r in rows)[:limit]
            # the turns too (KEY SHARE, as the vectors' foreign key would take them later): a forget of one of
            # them waits for this transaction instead of deadlocking with it
            found = await (await conn.execute(f"SELECT {COLUMNS} FROM messages WHERE id = ANY(%s) ORDER BY id "
                                              "FOR KEY SHARE", (ids,))).fetchall()
            todo = [row_to_turn(r) for r in found]

            async def write(vectors) -> None:
                if vectors:  # a full batch: a drain that may have a large backlog (bulk: the index waits)
                    await self.dense.ensure_for(model, len(vectors[0]) // 4, full=len(todo) >= limit)
                await _keep_turn_vectors(conn, model, todo, vectors)

            yield todo, write
        if len(todo) < limit:  # caught up (committed): an index set aside for a bulk drain is made again now
            await self.dense.caught_up(model)

    async def count_turns_missing_vectors(self, model):
        return (await self.fetch(
            "SELECT (SELECT count(*) FROM vector_backlog) + (SELECT count(*) FROM message_vectors "
            "WHERE model < %s OR model > %s) AS n", (model, model)))[0]["n"]

    async def drop_turn_vectors(self):
        async with self.connection() as conn, conn.transaction():
            dropped = (await conn.execute("DELETE FROM message_vectors")).rowcount
            await conn.execute("INSERT INTO vector_backlog (message_id) SELECT id FROM messages ON CONFLICT DO NOTHING")
        self.dense.forget()
        return dropped

    async def turn_similarities(self, model, qvec, n, context, channel=None):
        return await self.dense.similarities(model, qvec, n, context, channel)

    async def channel_similarities(self, model, qvec, channels, n, context):
        return await self.dense.channel_similarities(model, qvec, list(channels), n, context)

    async def repair_turn_index(self, model):
        """``pps reindex``: make the model's HNSW index if it is missing (an entity from before it); PostgreSQL
        keeps it up to date with every row from then on."""
        row = await self.fetch("SELECT vector_dims(embedding) AS d, count(*) OVER () AS n FROM message_vectors "
                               "WHERE model = %s LIMIT 1", (model,))
        if not row:
            return None
        dim = row[0]["d"]
        if dim > HNSW_MAX_DIM:
            return {"hnsw_index": None, "exact_scan": f"{dim} dimensions (HNSW takes at most {HNSW_MAX_DIM})"}
        await self.dense.settled()
        self.dense.forget()
        await self.dense.make(model, dim)
        return {"hnsw_index": index_name(model, dim), "hnsw_vectors": row[0]["n"]}

    async def summaries_missing_vectors(self, model, limit, after):
        rows = await self.fetch(
            "SELECT s.id, s.summary_text FROM message_summaries s WHERE s.id > %s AND NOT EXISTS (SELECT 1 FROM "
            "summary_vectors v WHERE v.summary_id = s.id AND v.model = %s) ORDER BY s.id LIMIT %s",
            (after, model, limit))
        todo = [(r["id"], r["summary_text"]) for r in rows]
        return todo, todo[-1][0] if todo else after

    async def write_summary_vectors(self, model, ids, vectors):
        async with self.connection() as conn, conn.transaction():
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO summary_vectors (summary_id, model, embedding) VALUES (%s, %s, %s::vector) "
                    "ON CONFLICT (summary_id) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding",
                    [(i, model, vec(v)) for i, v in zip(ids, vectors, strict=True)])

    async def count_summaries_missing_vectors(self, model):
        return (await self.fetch(
            "SELECT count(*) AS n FROM message_summaries s WHERE NOT EXISTS (SELECT 1 FROM summary_vectors v "
            "WHERE v.summary_id = s.id AND v.model = %s)", (model,)))[0]["n"]

    async def drop_summary_vectors(self):
        async with self.connection() as conn:
            return (await conn.execute("DELETE FROM summary_vectors")).rowcount

    async def summary_similarities(self, model, qvec, n):
        q = vec(qvec)
        found = await self.fetch(
            "SELECT summary_id, 1 - (embedding <=> %s::vector) AS sim FROM summary_vectors WHERE model = %s "
            "ORDER BY embedding <=> %s::vector LIMIT %s", (q, model, q, n))
        return {r["summary_id"]: float(r["sim"]) for r in found}

"""Turn and summary vectors on PostgreSQL: pgvector columns, searched by PostgreSQL.

The turn domain (``pps_turns.retriever``) embeds and fuses; this keeps the vectors and answers the store's dense
calls. Turn similarities: pgvector's HNSW index (one per model, a partial index on ``message_vectors`` over
``embedding::vector(dimension)``, made the first time a model's vectors are written or searched) gives the
nearest ``ANN_OVERFETCH`` x n turns by their own vector (``ORDER BY embedding <=> q LIMIT k``, ``hnsw.ef_search``
set for the query); their context vectors (each turn's vector plus its neighbours', as ``pps_turns.vectors.TurnVectors`` makes them)
are scored exactly from dot products PostgreSQL computes over the few rows around them (:data:`CONTEXT_PARTS`):
no vector leaves the database and no server holds the entity's vectors. Summary
similarities are a cosine scan (``<=>``) in SQL (summaries are few).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from typing import Any

from pps_turns.retrieval import NEIGHBOUR_REACH, links_from_rows
from psycopg import sql
from psycopg.rows import dict_row

log = logging.getLogger("pps.postgres")

#: Approximate candidates per dense candidate wanted, rescored exactly (as pps_sqlite's index).
ANN_OVERFETCH = 2
#: pgvector's HNSW takes ``vector`` columns of up to this many dimensions; longer vectors are scanned exactly.
HNSW_MAX_DIM = 2000
#: pgvector's ``hnsw.ef_search`` upper bound.
EF_SEARCH_MAX = 1000
#: A large backlog is embedded with the model's HNSW index out of the way and the index made from the rows after:
#: pgvector builds an index from its rows several times faster than it takes them one insert at a time (the
#: insert was the whole cost of a drain, bench/RESULTS.md "Issue 37: the PostgreSQL vector backlog in batches").
#: While at least this many turns wait for a vector of the model, a missing index is not made (searches scan the
#: vectors exactly in the database meanwhile, as during any build), and an index of fewer than
#: :data:`REBUILD_RATIO` times the backlog is set aside (dropped) and made again once the backlog has drained.
BULK_BACKLOG = 5_000
REBUILD_RATIO = 4
#: A drain in full batches looks at the backlog's size at most this often (s).
BULK_CHECK_S = 5.0
#: At most this many waiting turns are counted (the counts read index entries; bounded, so each stays a few ms).
BULK_COUNT_CAP = 50_000


def vec(v: Any) -> str:
    """A pgvector literal ('[0.1,0.2,...]') from float32 bytes or any float sequence."""
    import numpy as np

    if isinstance(v, bytes | bytearray | memoryview):
        v = np.frombuffer(v, dtype=np.float32)
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


async def _valid(conn: Any, name: str) -> bool | None:
    """Whether the index ``name`` of the connection's schema is usable: True, False (a concurrent build not
    finished, or stopped half-way), None (no such index)."""
    row = await (await conn.execute(
        "SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = %s", (name,))).fetchone()
    return None if row is None else bool(row["valid"])


def index_name(model: str, dim: int) -> str:
    return "idx_message_vectors_hnsw_" + hashlib.sha1(f"{model}|{dim}".encode()).hexdigest()[:12]


class TurnIndex:
    """The dense side of the PostgreSQL store: an HNSW index per model, queried in SQL."""

    def __init__(self, store: Any) -> None:
        self.store = store
        #: (model, dimension) pairs whose index this process has seen or made
        self.ready: set[tuple[str, int]] = set()
        #: the index being made (or set aside) in the background (searches scan exactly in the database meanwhile)
        self.building: asyncio.Task[None] | None = None
        #: when a drain in full batches last counted the backlog, per model
        self._checked: dict[str, float] = {}
        #: the dimension of each model's vectors this process wrote
        self.dims: dict[str, int] = {}

    def forget(self) -> None:
        self.ready.clear()  # vectors were dropped (the index stays, emptied): looked up again at the next use

    async def ensure(self, conn: Any, model: str, dim: int) -> bool:
        """Whether the model's HNSW index is there to use. When it is missing it is made in the background
        (:meth:`make`; a search meanwhile scans exactly in the database, vector writes go on); False also when
        vectors of this length cannot be indexed (they are always scanned exactly)."""
        if dim > HNSW_MAX_DIM:
            return False
        if (model, dim) in self.ready:
            return True
        valid = await _valid(conn, index_name(model, dim))
        if valid:
            self.ready.add((model, dim))
            return True
        if valid is None and await self.waiting(conn, model) >= BULK_BACKLOG:
            return False  # made from the rows once the backlog has drained, not grown with it a row at a time
        # missing, or a build not finished (here, on another server, or one stopped half-way): made (again) in
        # the background; searches scan exactly meanwhile
        if self.building is None or self.building.done():
            self.building = asyncio.get_running_loop().create_task(self._make(model, dim))
        return False

    async def make(self, model: str, dim: int) -> None:
        """Make the model's HNSW index unless it exists, without blocking writes: ``CREATE INDEX CONCURRENTLY``
        (outside a transaction: every server goes on writing vectors and turns while it builds, minutes on a long
        history, bench/RESULTS.md), on a connection of its own (not one of the pool's), one builder at a time across
        servers (a session advisory lock, released when the connection closes however the build ends). A build
        stopped half-way leaves an invalid index of that name: it is dropped and built again."""
        s = self.store.settings
        name = index_name(model, dim)
        async with self._builder() as conn:
            valid = await _valid(conn, name)
            if valid is False:  # nobody else builds it (we hold the lock): what a stopped build left
                log.info("dropping the unfinished HNSW index %s to build it again", name)
                await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
            if not valid:
                log.info("making the HNSW index of %s turn vectors (%d dimensions), writes going on", model, dim)
                # the tables vacuumed and their statistics fresh first (PostgreSQL's advice after a bulk load): an
                # index is made after a bulk of vectors (a first drain, or one with the index set aside) that
                # autovacuum may not have looked at yet, and the searches' context queries planned without it
                # took 2-3x longer (bench/RESULTS.md)
                if s.index_build_memory_mb:  # the graph in memory: pgvector's build is 2.3x faster at 50,000
                    # vectors with 1 GB than with PostgreSQL's default 64 MB (bench/RESULTS.md)
                    await conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(
                        sql.Literal(f"{s.index_build_memory_mb}MB")))
                await conn.execute("VACUUM (ANALYZE) message_vectors, messages")
                await conn.execute(sql.SQL(
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON message_vectors USING hnsw "
                    "((embedding::vector({})) vector_cosine_ops) WITH (m = {}, ef_construction = {}) "
                    "WHERE model = {}").format(
                    sql.Identifier(name), sql.Literal(dim), sql.Literal(s.hnsw_m),
                    sql.Literal(s.hnsw_ef_construction), sql.Literal(model)))
        self.ready.add((model, dim))

    async def _make(self, model: str, dim: int) -> None:
        try:
            await self.make(model, dim)
        except Exception as exc:  # derived data: searched exactly meanwhile, tried again at the next search
            log.warning("the HNSW index of turn vectors was not made: %s: %s", type(exc).__name__, exc)

    async def settled(self) -> None:
        """Wait for an index being made in the background (``pps reindex``, tests, benchmarks)."""
        if self.building is not None:
            await asyncio.shield(self.building)

    async def close(self) -> None:
        """Stop an index being made (PostgreSQL rolls it back; the next search starts it again)."""
        if self.building is not None and not self.building.done():
            self.building.cancel()
            with contextlib.suppress(BaseException):
                await self.building
        self.building = None

    async def ensure_for(self, model: str, dim: int, full: bool = False) -> None:
        """Before vectors of ``model`` are written: the index looked up (made when missing, unless a large backlog
        waits). ``full``: a drain's full batch (more may wait: the backlog's size is looked at, every
        :data:`BULK_CHECK_S`)."""
        if dim > HNSW_MAX_DIM:
            return
        self.dims[model] = dim
        if full:
            now = time.monotonic()
            if now - self._checked.get(model, 0.0) < BULK_CHECK_S:
                return
            self._checked[model] = now
        if (model, dim) not in self.ready:
            async with self.store.connection() as conn:
                await self.ensure(conn, model, dim)
        if full and (model, dim) in self.ready:
            await self._bulk_check(model, dim)

    async def caught_up(self, model: str) -> None:
        """A drain found no more turns waiting than its batch held: the model's index looked up again (set aside
        here or by another server, whose drain may have stopped) and made if it is missing."""
        dim = self.dims.get(model)
        if dim is not None and dim <= HNSW_MAX_DIM:
            self.ready.discard((model, dim))
            await self.ensure_for(model, dim)

    async def waiting(self, conn: Any, model: str, cap: int = BULK_BACKLOG) -> int:
        """How many turns wait for a vector of ``model``, counted up to ``cap``."""
        from .vectors import MISSING_IDS

        row = await (await conn.execute(f"SELECT count(*) AS n FROM ({MISSING_IDS}) w",
                                        (cap, model, cap, model, cap, cap))).fetchone()
        return int(row["n"])

    async def _bulk_check(self, model: str, dim: int) -> None:
        """A large backlog beside a smaller index: the index set aside in the background, made again from the
        rows once the backlog has drained (:data:`BULK_BACKLOG`)."""
        if self.building is not None and not self.building.done():
            return
        async with self.store.connection() as conn:
            backlog = await self.waiting(conn, model, BULK_COUNT_CAP)
            if backlog < BULK_BACKLOG:
                return
            row = await (await conn.execute(
                "SELECT count(*) AS n FROM (SELECT 1 FROM message_vectors WHERE model = %s LIMIT %s) v",
                (model, REBUILD_RATIO * backlog))).fetchone()
        if row["n"] < REBUILD_RATIO * backlog:
            self.building = asyncio.get_running_loop().create_task(self._set_aside(model, dim, backlog, row["n"]))

    async def _set_aside(self, model: str, dim: int, backlog: int, rows: int) -> None:
        """Drop the model's index without blocking reads or writes (``DROP INDEX CONCURRENTLY``, one builder at a
        time across servers); the drain's writes make it again when the backlog has drained."""
        name = index_name(model, dim)
        try:
            async with self._builder() as conn:
                log.info("setting the HNSW index %s (%d vectors) aside while %s%d turns are embedded; it is made "
                         "again from the rows after", name, rows, "at least " if backlog >= BULK_COUNT_CAP else "",
                         backlog)
                await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
            self.ready.discard((model, dim))  # the writes look it up again: made when the backlog has drained
        except Exception as exc:  # it stays, and grows a row at a time
            log.warning("the HNSW index of turn vectors was not set aside: %s: %s", type(exc).__name__, exc)

    @contextlib.asynccontextmanager
    async def _builder(self):
        """A connection of its own (not one of the pool's), autocommit, holding the schema's builder lock (a
        session advisory lock, released when the connection closes however the work ends)."""
        import psycopg

        s = self.store.settings
        async with await psycopg.AsyncConnection.connect(
                s.dsn, autocommit=True, connect_timeout=max(1, int(s.connect_timeout_s)),
                row_factory=dict_row) as conn:
            await conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.store.schema)))
            await conn.execute("SELECT pg_advisory_lock(hashtext(%s))", ("pps-hnsw:" + self.store.schema,))
            yield conn

    async def candidates(self, conn: Any, model: str, q: str, dim: int, k: int, channel: str | None) -> list[int]:
        """The ``k`` turns nearest ``q`` by their own vector: from the HNSW index; for one channel from the index
        too when enough of its nearest are of that channel (:meth:`channel_from_index`), else by an exact scan of
        that channel's vectors only (:data:`CHANNEL_EXACT`); vectors too long to index: an exact scan."""
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
        else:  # bounded by the channel, never a scan of every turn's vector
            found = await self.channel_from_index(conn, model, q, dim, k, channel)
            if found is not None:
                return found
            rows = await (await conn.execute(CHANNEL_EXACT, (channel, model, q, k))).fetchall()
        return [r["message_id"] for r in rows]

    async def channel_from_index(self, conn: Any, model: str, q: str, dim: int, k: int, channel: str) -> list[int] | None:
        """The ``k`` turns of ``channel`` nearest ``q`` from the HNSW index (what pgvector 0.8's iterative scan does,
        in one step for 0.6): its :data:`EF_SEARCH_MAX` nearest of every channel, kept if of this one; None when
        fewer than ``k`` are (a channel that is a small part of the history: scanned exactly, its rows only)."""
        if not await self.ensure(conn, model, dim):
            return None
        async with conn.transaction():
            await conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(EF_SEARCH_MAX)))
            rows = await (await conn.execute(sql.SQL(
                "SELECT n.message_id FROM (SELECT message_id, embedding::vector({d}) <=> %s::vector({d}) AS dist "
                "FROM message_vectors WHERE model = {m} ORDER BY dist LIMIT {limit}) n "
                "JOIN messages t ON t.id = n.message_id WHERE t.channel = %s ORDER BY n.dist LIMIT %s").format(
                m=sql.Literal(model), d=sql.Literal(dim), limit=sql.Literal(EF_SEARCH_MAX)),
                (q, channel, k))).fetchall()
        return [r["message_id"] for r in rows] if len(rows) >= k else None

    async def similarities(self, model: str, qvec: Any, n: int, context: float, channel: str | None = None):
        """(ids, cosines) of the context vectors of the nearest candidates and of the turns next to them."""
        import numpy as np

        qvec = np.asarray(qvec, dtype=np.float32)
        q = vec(qvec)
        async with self.store.connection() as conn:
            ids = await self.candidates(conn, model, q, len(qvec), n * ANN_OVERFETCH, channel)
            if not ids:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
            want = sorted(set(ids))
            for _hop in range(2 if context else 0):  # each one's nearest turn of its channel on each side, then theirs
                pairs = await (await conn.execute(CHANNEL_PAIRS, (NEIGHBOUR_REACH, NEIGHBOUR_REACH, want))).fetchall()
                links = links_from_rows(want, [(r["a"], r["b"]) for r in pairs], 1)
                want = sorted({*want, *(j for before, after in links.values() for j in (*before, *after))})
            rows = await (await conn.execute(CONTEXT_PARTS, (model, want, q, NEIGHBOUR_REACH))).fetchall()
        return context_cosines(ids, rows, context)


    async def channel_similarities(self, model: str, qvec: Any, channels: list[str], n: int, context: float):
        """The ``n`` best turns of each of ``channels`` by context vector (``TurnStore.channel_similarities``): a
        channel of at most :data:`CHANNEL_SCAN` turns is scored whole in the database (every turn's context parts,
        :data:`CHANNEL_PARTS`: exact); a larger one from its ``ANN_OVERFETCH`` x n nearest by their own vector (an
        exact channel-filtered scan, :meth:`candidates`) and their neighbours, rescored as :meth:`similarities`."""
        import numpy as np

        qvec = np.asarray(qvec, dtype=np.float32)
        q = vec(qvec)
        from pps_turns.vectors import top_rows

        out_ids, out_cos = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.float32)]
        async with self.store.connection() as conn:
            for ch in dict.fromkeys(channels):
                size = (await (await conn.execute("SELECT count(*) AS n FROM messages WHERE channel = %s",
                                                  (ch,))).fetchone())["n"]
                if not size:
                    continue
                if size <= CHANNEL_SCAN:
                    rows = await (await conn.execute(CHANNEL_PARTS, (model, ch, q, NEIGHBOUR_REACH))).fetchall()
                    ids, cos = context_cosines([r["id"] for r in rows], rows, context)
                else:
                    cands = await self.candidates(conn, model, q, len(qvec), n * ANN_OVERFETCH, ch)
                    want = sorted(set(cands))
                    for _hop in range(2 if context else 0):
                        pairs = await (await conn.execute(CHANNEL_PAIRS, (NEIGHBOUR_REACH, NEIGHBOUR_REACH,
                                                                          want))).fetchall()
                        links = links_from_rows(want, [(r["a"], r["b"]) for r in pairs], 1)
                        want = sorted({*want, *(j for before, after in links.values() for j in (*before, *after))})
                    rows = await (await conn.execute(CONTEXT_PARTS, (model, want, q, NEIGHBOUR_REACH))).fetchall()
                    ids, cos = context_cosines(cands, rows, context)
                best = top_rows(cos, n)
                out_ids.append(ids[best])
                out_cos.append(cos[best])
        return np.concatenate(out_ids), np.concatenate(out_cos)


#: A channel of at most this many turns is scored whole for its own best turns by meaning (in the database).
CHANNEL_SCAN = 20_000

#: The nearest turns of one channel by an exact scan of that channel's vectors only (each found by its key from the
#: channel's rows: the plan cannot turn into a scan of every turn's vector, as a join on the channel could).
CHANNEL_EXACT = ("SELECT c.id AS message_id FROM messages c, LATERAL (SELECT embedding, model FROM message_vectors v "
                 "WHERE v.message_id = c.id OFFSET 0) v WHERE c.channel = %s AND v.model = %s "
                 "ORDER BY v.embedding <=> %s::vector LIMIT %s")

#: Each of a set of turns and every turn of its channel within reach (the neighbours of the context vectors): each
#: turn's neighbours found by key (``idx_messages_channel``), a few rows each. As a plain join, the generic plan
#: PostgreSQL settles on for a prepared statement (psycopg prepares it after five runs) hashed every turn of the
#: channels: 274 ms instead of 3 at 20,000 turns, once the table had statistics.
CHANNEL_PAIRS = ("SELECT m.id AS a, p.id AS b FROM messages m, LATERAL (SELECT p.id FROM messages p "
                 "WHERE p.channel = m.channel AND p.id BETWEEN m.id - %s AND m.id + %s AND p.id <> m.id OFFSET 0) p "
                 "WHERE m.id = ANY(%s)")


#: What the context cosines of candidates need, computed where the vectors are (a few numbers per row, not the
#: vectors): each row's dot product with the question and with itself, and with the rows one and two before it in
#: its channel (the context vector of j is v_j + w (v_p + v_n), p and n its nearest turns of its channel within
#: reach, so |c|^2 needs v_j.v_p, v_j.v_n and v_p.v_n). The rows are the candidates and their neighbours'.
CONTEXT_PARTS = (
    "WITH w AS (SELECT v.message_id AS id, v.embedding AS e, m.channel AS c FROM message_vectors v "
    "JOIN messages m ON m.id = v.message_id WHERE v.model = %s AND v.message_id = ANY(%s)) "
    "SELECT id, c, -(e <#> %s::vector) AS qd, -(e <#> e) AS sq, "
    "CASE WHEN lag(id) OVER o >= id - %s THEN -(e <#> lag(e) OVER o) END AS d1, "
    "-(e <#> lag(e, 2) OVER o) AS d2 "
    "FROM w WINDOW o AS (PARTITION BY c ORDER BY id) ORDER BY id")


#: :data:`CONTEXT_PARTS` for every turn of one channel that has a vector of the model.
CHANNEL_PARTS = CONTEXT_PARTS.replace("v.message_id = ANY(%s)", "m.channel = %s")


def context_cosines(ids: list[int], rows: list[dict[str, Any]], context: float):
    """The cosines ``pps_turns.vectors.TurnVectors.scores`` gives (a turn's vector plus ``context`` times its
    nearest turns of its channel within reach, re-normalised) for the candidates and those neighbours,
    from :data:`CONTEXT_PARTS`' dot products. A turn whose neighbours have no vector counts them as absent."""
    import math

    import numpy as np

    at = {r["id"]: r for r in rows}
    if not context:
        out = [(i, at[i]["qd"]) for i in sorted(set(ids)) if i in at]
    else:
        out = []
        w = context
        by_channel: dict[Any, list[int]] = {}
        for r in rows:  # ascending ids
            by_channel.setdefault(r["c"], []).append(r["id"])
        before: dict[int, int] = {}
        after: dict[int, int] = {}
        for held in by_channel.values():
            for a, b in zip(held, held[1:], strict=False):
                if b - a <= NEIGHBOUR_REACH:
                    before[b], after[a] = a, b
        scored = {i for i in ids if i in at}
        scored |= {before[i] for i in scored if i in before} | {after[i] for i in scored if i in after}
        for j in sorted(scored):
            r = at[j]
            num, nsq = r["qd"], r["sq"]
            p = at[before[j]] if j in before else None
            nx = at[after[j]] if j in after else None
            if p is not None:
                num += w * p["qd"]
                nsq += w * w * p["sq"] + 2 * w * r["d1"]
            if nx is not None:
                num += w * nx["qd"]
                nsq += w * w * nx["sq"] + 2 * w * nx["d1"]
            if p is not None and nx is not None:
                nsq += 2 * w * w * nx["d2"]
            out.append((j, num / (math.sqrt(max(nsq, 0.0)) + 1e-12)))
    return (np.asarray([i for i, _s in out], dtype=np.int64), np.asarray([s for _i, s in out], dtype=np.float32))

"""Turn and summary vectors on PostgreSQL: pgvector columns, searched by PostgreSQL.

The turn domain (``pps_turns.retriever``) embeds and fuses; this keeps the vectors and answers the store's dense
calls. Turn similarities: pgvector's HNSW index (one per model, a partial index on ``message_vectors`` over
``embedding::vector(dimension)``, made the first time a model's vectors are written or searched) gives the
nearest ``ANN_OVERFETCH`` x n turns by their own vector (``ORDER BY embedding <=> q LIMIT k``, ``hnsw.ef_search``
set for the query); their context vectors (each turn's vector plus its neighbours', as ``pps_turns.vectors.TurnVectors`` makes them)
are scored exactly from dot products PostgreSQL computes over the few rows around them (:func:`context_query`,
one statement with the nearest):
no vector leaves the database and no server holds the entity's vectors. Summary
similarities are a cosine scan (``<=>``) in SQL (summaries are few).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from typing import Any

from pps_turns.retrieval import NEIGHBOUR_REACH
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
        #: a channel's digest -> (when counted, its turns, every turn)
        self.sizes: dict[bytes, tuple[float, int, int]] = {}
        #: (model, question vector) -> the index's nearest turns, (id, channel digest) nearest first: the last few
        #: questions' first passes, for their second pass
        self.nearest_seen: OrderedDict[tuple[str, bytes], list[tuple[int, bytes]]] = OrderedDict()
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
            # no planner statistics of the vectors (ANALYZE would sample them for an expression index): nothing
            # derived from a turn in pg_statistic (schema v7, docs/PRIVACY.md)
            await conn.execute(sql.SQL("ALTER INDEX {} ALTER COLUMN 1 SET STATISTICS 0").format(sql.Identifier(name)))
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

    def nearest(self, model: str, dim: int, indexed: bool, channel: str | None) -> tuple[sql.Composable, int | None]:
        """The statement giving the ``%(k)s`` turns nearest ``%(q)s`` by their own vector (as ``id``), and the
        ``hnsw.ef_search`` it needs beyond the session's (None: none). From the HNSW index; for one channel from
        the index too when enough of its nearest are of that channel (what pgvector 0.8's iterative scan does, in
        one step for 0.6: the index's :data:`EF_SEARCH_MAX` nearest of every channel, kept if of this one), else by
        an exact scan of that channel's vectors only (:data:`CHANNEL_EXACT`, in the same statement: PostgreSQL
        runs it only when the index gave too few); vectors too long to index: an exact scan."""
        m, d = sql.Literal(model), sql.Literal(dim)
        if channel is None and indexed:
            # the model and dimension are literals: the planner matches the partial index on them. The index's
            # FIRST_WIDE nearest (``nn``, with their distance), of which the k nearest are the candidates: the
            # others are kept (ids and channels) for the second pass's channels (:meth:`channel_similarities`)
            return sql.SQL("SELECT message_id AS id, embedding::vector({d}) <=> %(q)s::vector({d}) AS dist "
                           "FROM message_vectors WHERE model = {m} ORDER BY dist LIMIT %(wide)s").format(
                m=m, d=d), -1
        if channel is None:
            return sql.SQL("SELECT message_id AS id FROM message_vectors WHERE model = %(model)s "
                           "ORDER BY embedding <=> %(q)s::vector LIMIT %(k)s"), None
        if not indexed:
            return sql.SQL(CHANNEL_EXACT), None
        return sql.SQL(
            "WITH ix AS (SELECT n.message_id AS id FROM (SELECT message_id, embedding::vector({d}) <=> "
            "%(q)s::vector({d}) AS dist FROM message_vectors WHERE model = {m} ORDER BY dist LIMIT {limit}) n "
            "JOIN messages t ON t.id = n.message_id WHERE t.channel = %(channel)s ORDER BY n.dist LIMIT %(k)s) "
            "SELECT id FROM ix WHERE (SELECT count(*) FROM ix) >= %(k)s "
            "UNION ALL SELECT id FROM ({exact}) ex WHERE (SELECT count(*) FROM ix) < %(k)s").format(
            m=m, d=d, limit=sql.Literal(EF_SEARCH_MAX), exact=sql.SQL(CHANNEL_EXACT)), EF_SEARCH_MAX

    async def context(self, conn: Any, model: str, qvec: Any, k: int, context: float,
                      channel: str | None) -> tuple[list[int], list[dict[str, Any]]]:
        """The ``k`` nearest turns (:meth:`nearest`) and the context parts of them and of the turns next to them
        (two hops: each one's nearest turn of its channel on each side, then theirs), in one statement (one round
        trip; with the transaction that sets a wider ``hnsw.ef_search``, one pipeline)."""
        dim = len(qvec)
        q = vec(qvec)
        indexed = await self.ensure(conn, model, dim)
        near, ef = self.nearest(model, dim, indexed, channel)
        if ef is None and channel is None and indexed and k > self.store.settings.hnsw_ef_search:
            ef = min(EF_SEARCH_MAX, k)
        wide = channel is None and indexed
        query = context_query(near, 2 if context else 0, wide)
        args = {"model": model, "q": q, "k": k, "channel": channel, "reach": NEIGHBOUR_REACH,
                "wide": min(EF_SEARCH_MAX, max(FIRST_WIDE, k))}
        if ef == -1:  # the wide first read: hnsw.ef_search as wide as the read
            ef = args["wide"] if args["wide"] > self.store.settings.hnsw_ef_search else None
        rows = await self.run(conn, query, args, ef)
        if wide:
            nearest = [r for r in rows if r["dist"] is not None]
            rows = [r for r in rows if r["dist"] is None]
            nearest.sort(key=lambda r: (r["dist"], r["id"]))
            self.remember((model, qvec.tobytes()), [(r["id"], _digest(r["c"])) for r in nearest])
        rows.sort(key=lambda r: r["id"])
        return [r["id"] for r in rows if r["cand"]], rows

    async def run(self, conn: Any, query: sql.Composable, args: dict[str, Any], ef: int | None) -> list[dict[str, Any]]:
        """``query``'s rows; with ``hnsw.ef_search`` at ``ef`` for it (its transaction, the setting and the query in
        one pipeline: one round trip)."""
        if ef is None:
            return await (await conn.execute(query, args)).fetchall()
        async with conn.pipeline():
            async with conn.transaction():
                await conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef)))
                cur = await conn.execute(query, args)
        return await cur.fetchall()

    def remember(self, key: tuple[str, bytes], nearest: list[tuple[int, bytes]]) -> None:
        """The index's nearest turns of a question (ids and channel digests, no text), kept for its second pass."""
        self.nearest_seen[key] = nearest
        self.nearest_seen.move_to_end(key)
        while len(self.nearest_seen) > NEAREST_KEPT:
            self.nearest_seen.popitem(last=False)

    async def similarities(self, model: str, qvec: Any, n: int, context: float, channel: str | None = None):
        """(ids, cosines) of the context vectors of the nearest candidates and of the turns next to them."""
        import numpy as np

        qvec = np.asarray(qvec, dtype=np.float32)
        async with self.store.connection() as conn:
            ids, rows = await self.context(conn, model, qvec, n * ANN_OVERFETCH, context, channel)
        if not ids:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        return context_cosines(ids, rows, context)

    async def channel_size(self, conn: Any, channel: str) -> tuple[int, int]:
        """(the channel's turns, every turn), kept for :data:`SIZE_TTL_S` (which way the channel's second pass goes,
        and how wide a read of the index finds enough of its turns: a channel's share moves slowly)."""
        import time

        now = time.monotonic()
        key = _digest(channel)  # no channel name kept in memory
        hit = self.sizes.get(key)
        if hit is None or now - hit[0] > SIZE_TTL_S:
            if len(self.sizes) > 10_000:
                self.sizes.clear()
            row = await (await conn.execute(
                "SELECT (SELECT count(*) FROM messages WHERE channel = %s) AS n, "
                "(SELECT coalesce(sum(messages), 0) FROM turn_counts) AS total", (channel,))).fetchone()
            hit = self.sizes[key] = (now, int(row["n"]), max(int(row["total"]), int(row["n"])))
        return hit[1], hit[2]

    async def channel_similarities(self, model: str, qvec: Any, channels: list[str], n: int, context: float):
        """The ``n`` best turns of each of ``channels`` by context vector (``TurnStore.channel_similarities``): a
        channel of at most :data:`CHANNEL_SCAN` turns is scored whole in the database (every turn's context parts,
        :data:`CHANNEL_PARTS`: exact); a larger one from its ``ANN_OVERFETCH`` x n nearest by their own vector
        (:meth:`nearest`) and their neighbours, rescored as :meth:`similarities`."""
        import numpy as np

        qvec = np.asarray(qvec, dtype=np.float32)
        q = vec(qvec)
        from pps_turns.vectors import top_rows

        out_ids, out_cos = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.float32)]
        async with self.store.connection() as conn:
            for ch in dict.fromkeys(channels):
                size, total = await self.channel_size(conn, ch)
                if not size:
                    continue
                if size <= CHANNEL_SCAN:
                    rows = await (await conn.execute(CHANNEL_PARTS, (model, ch, q, NEIGHBOUR_REACH))).fetchall()
                    ids, cos = context_cosines([r["id"] for r in rows], rows, context)
                else:
                    k = n * ANN_OVERFETCH
                    # as SQLite's index does: the nearest turns of every channel, as many as should hold k of this
                    # one (k times its inverse share), the channel's kept; from the first pass's read when it read
                    # that many, else a read of the index as wide as the index allows (and an exact scan of the
                    # channel's own vectors if even that held fewer than k)
                    wide = min(EF_SEARCH_MAX, k * -(-total // size))
                    seen = self.nearest_seen.get((model, qvec.tobytes())) or []
                    mine = [i for i, c in seen[:wide] if c == _digest(ch)][:k] if wide <= len(seen) else []
                    if mine:  # the first pass's wider read of the index has them: no second read
                        rows = await self.run(conn, context_query(sql.SQL("SELECT unnest(%(ids)s::bigint[]) AS id"),
                                                                  2 if context else 0),
                                              {"model": model, "q": q, "ids": mine, "reach": NEIGHBOUR_REACH}, None)
                        rows.sort(key=lambda r: r["id"])
                        cands = mine
                    else:
                        cands, rows = await self.context(conn, model, qvec, k, context, ch)
                    ids, cos = context_cosines(cands, rows, context)
                best = top_rows(cos, n)
                out_ids.append(ids[best])
                out_cos.append(cos[best])
        return np.concatenate(out_ids), np.concatenate(out_cos)


#: How many of the index's nearest turns a first pass reads (its candidates are the nearest of them; the rest serve
#: its second pass: a channel of a third of the history finds its candidates among them, as SQLite's index does).
FIRST_WIDE = 600

#: First passes whose nearest turns are kept for their second pass.
NEAREST_KEPT = 8


def _digest(channel: str) -> bytes:
    return hashlib.blake2b(channel.encode(), digest_size=16).digest()


#: How long a channel's counted size is kept (seconds).
SIZE_TTL_S = 30.0

#: A channel of at most this many turns is scored whole for its own best turns by meaning (in the database).
CHANNEL_SCAN = 20_000

#: The nearest turns of one channel by an exact scan of that channel's vectors only (each found by its key from the
#: channel's rows: the plan cannot turn into a scan of every turn's vector, as a join on the channel could).
CHANNEL_EXACT = ("SELECT c.id FROM messages c, LATERAL (SELECT embedding, model FROM message_vectors v "
                 "WHERE v.message_id = c.id OFFSET 0) v WHERE c.channel = %(channel)s AND v.model = %(model)s "
                 "ORDER BY v.embedding <=> %(q)s::vector LIMIT %(k)s")

#: One hop of the context: each turn of the set before (id, channel) and its nearest turn of that channel within
#: reach on each side (``pps_turns.retrieval.links_from_rows`` with reach 1), from the ``(channel, id)`` index.
_HOP = ("{this} AS (SELECT id, c FROM {prev} UNION SELECT n.id, s.c FROM {prev} s, "
        "LATERAL ((SELECT p.id FROM messages p WHERE p.channel = s.c AND p.id < s.id "
        "AND p.id >= s.id - %(reach)s ORDER BY p.id DESC LIMIT 1) UNION ALL "
        "(SELECT p.id FROM messages p WHERE p.channel = s.c AND p.id > s.id AND p.id <= s.id + %(reach)s "
        "ORDER BY p.id LIMIT 1)) AS n)")

#: What the context cosines of candidates need, computed where the vectors are (a few numbers per row, not the
#: vectors): each row's dot product with the question and with itself, and with the rows one and two before it in
#: its channel (the context vector of j is v_j + w (v_p + v_n), p and n its nearest turns of its channel within
#: reach, so |c|^2 needs v_j.v_p, v_j.v_n and v_p.v_n); ``cand``: one of the nearest themselves. The rows are the
#: candidates and their neighbours'.
_PARTS = (
    "w AS (SELECT v.message_id AS id, v.embedding AS e, s.c FROM {last} s "
    "JOIN message_vectors v ON v.message_id = s.id WHERE v.model = %(model)s) "
    "SELECT id, c, -(e <#> %(q)s::vector) AS qd, -(e <#> e) AS sq, "
    "CASE WHEN lag(id) OVER o >= id - %(reach)s THEN -(e <#> lag(e) OVER o) END AS d1, "
    "-(e <#> lag(e, 2) OVER o) AS d2, id IN (SELECT id FROM s0) AS cand, NULL::float8 AS dist "
    "FROM w WINDOW o AS (PARTITION BY c ORDER BY id)")


def context_query(nearest: sql.Composable, hops: int, wide: bool = False) -> sql.Composable:
    """One statement: the turns ``nearest`` gives (``s0``), ``hops`` hops of neighbours, their context parts
    (``dist`` null). ``wide``: ``nearest`` gives more turns than the candidates, with their distance (``nn``): the
    ``%(k)s`` nearest are ``s0``, and every one of them comes back too (``id``, its channel ``c`` and ``dist``)."""
    if wide:
        parts: list[sql.Composable] = [sql.SQL("WITH nn AS ({}), s0 AS (SELECT id FROM nn ORDER BY dist, id "
                                               "LIMIT %(k)s)").format(nearest)]
    else:
        parts = [sql.SQL("WITH s0 AS ({})").format(nearest)]
    # each turn with its channel (h0), then each hop carries the channel along: no second look at a turn's row
    parts.append(sql.SQL(", h0 AS (SELECT m.id, m.channel AS c FROM s0 JOIN messages m ON m.id = s0.id)"))
    parts += [sql.SQL(", " + _HOP.format(this=f"h{h + 1}", prev=f"h{h}")) for h in range(hops)]
    parts.append(sql.SQL(", " + _PARTS.format(last=f"h{hops}")))
    if wide:
        parts.append(sql.SQL(" UNION ALL SELECT nn.id, m.channel, NULL, NULL, NULL, NULL, NULL, nn.dist "
                             "FROM nn JOIN messages m ON m.id = nn.id"))
    return sql.Composed(parts)


#: The context parts (as ``_PARTS``) of every turn of one channel that has a vector of the model.
CHANNEL_PARTS = (
    "WITH w AS (SELECT v.message_id AS id, v.embedding AS e, m.channel AS c FROM message_vectors v "
    "JOIN messages m ON m.id = v.message_id WHERE v.model = %s AND m.channel = %s) "
    "SELECT id, c, -(e <#> %s::vector) AS qd, -(e <#> e) AS sq, "
    "CASE WHEN lag(id) OVER o >= id - %s THEN -(e <#> lag(e) OVER o) END AS d1, "
    "-(e <#> lag(e, 2) OVER o) AS d2 "
    "FROM w WINDOW o AS (PARTITION BY c ORDER BY id) ORDER BY id")


def context_cosines(ids: list[int], rows: list[dict[str, Any]], context: float):
    """The cosines ``pps_turns.vectors.TurnVectors.scores`` gives (a turn's vector plus ``context`` times its
    nearest turns of its channel within reach, re-normalised) for the candidates and those neighbours,
    from the context parts' dot products (:func:`context_query`). A turn whose neighbours have no vector counts them as absent."""
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

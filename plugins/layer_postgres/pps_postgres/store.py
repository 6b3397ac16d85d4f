"""``pps_turns.TurnStore`` on PostgreSQL: psycopg 3 (async) with a connection pool.

Every operation is one transaction. Exactly-once capture is the unique index on ``message_id``
(``INSERT ... ON CONFLICT DO NOTHING``), so it holds across any number of PPS servers. Read cursors stay
exact across servers: a writer holds a shared advisory lock while it inserts, and a poll takes it
exclusively before it reads the newest id, so no turn below that id can still be uncommitted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import asynccontextmanager
from typing import Any

from pps_turns import context_plan, forgotten_ack, tombstones, turn_digest
from pps_turns import message_id_digest as digest
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from pps_core.errors import Conflict, InvalidParams, NotFound, Unavailable
from pps_core.textsearch import content_terms
from pps_core.timeutil import from_storage

from .rows import COLUMNS, SUMMARY_COLUMNS, row_to_summary, row_to_turn, ts
from .schema import NO_STATISTICS_VERSION, migrate, rewrite_statistics
from .settings import PostgresSettings, schema_for
from .textsearch import bm25
from .vectors import TurnVectors

log = logging.getLogger("pps.postgres")

#: One multi-row capture: new turns in input order, skipping message ids stored, turns stored without an id that come
#: back with one (the same channel, author, time and content) and turns with a tombstone (``mark``: the message id's digest,
#: ``key``: :func:`pps_turns.turn_digest`); summaries whose span strictly contains a new turn's time are flagged for
#: rewrite ("backfill") and named in ``inside``. The look for a turn stored without an id runs only for a turn that
#: has one (the OR: no anti-join over every plain turn), and ``(m.message_id || '') IS NULL`` cannot be answered from
#: the message-id index: without statistics of that column (schema v7) the planner took ``IS NULL`` for selective and
#: read every id-less entry of the index for each row (4 s a batch of 1,000 at 200,000 turns).
INSERT_BATCH = f"""
WITH batch AS (
    SELECT * FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                         %s::text[], %s::timestamptz[], %s::text[])
        AS b(ord, message_id, mark, key, content, author_name, channel, session_id, created_at, metadata)
), ins AS (
    INSERT INTO messages (id, message_id, content, author_name, channel, session_id, created_at, metadata)
    SELECT nextval(pg_get_serial_sequence('messages', 'id')), b.message_id, b.content, b.author_name, b.channel,
           b.session_id, b.created_at, b.metadata
    FROM batch b
    WHERE NOT EXISTS (SELECT 1 FROM forgotten_message_ids f WHERE f.digest = b.key OR f.digest = b.mark)
      AND (b.message_id IS NULL OR NOT EXISTS (SELECT 1 FROM messages m WHERE m.message_id = b.message_id))
      AND (b.message_id IS NULL
           OR NOT EXISTS (SELECT 1 FROM messages m WHERE m.created_at = b.created_at AND m.channel = b.channel
                                                     AND m.author_name = b.author_name AND m.content = b.content
                                                     AND (m.message_id || '') IS NULL))
    ORDER BY b.ord
    ON CONFLICT (message_id) DO NOTHING
    RETURNING {COLUMNS}
), queued AS (
    INSERT INTO vector_backlog (message_id) SELECT id FROM ins
), hits AS (
    SELECT ins.id AS turn, s.id AS summary FROM ins JOIN message_summaries s
    ON s.time_span_start < ins.created_at AND s.time_span_end > ins.created_at
), flagged AS (
    UPDATE message_summaries SET rewrite = 'backfill' WHERE rewrite IS NULL AND id IN (SELECT summary FROM hits)
)
SELECT ins.*, ARRAY(SELECT h.summary FROM hits h WHERE h.turn = ins.id ORDER BY h.summary) AS inside FROM ins
"""
#: The first key of a job's advisory lock (``claim_job``), with the schema; the job's name is the second.
JOB_LOCK = "pps-job:"
#: The advisory lock writers share and a poll takes exclusively (per schema: hashtext of this and the schema).
CAPTURE_LOCK = "pps-capture:"


#: A call with PostgreSQL unreachable: 503, and no address in the message (``/ready`` shows it to anyone).
UNREACHABLE = "PostgreSQL is unreachable; try again shortly"
#: How long a call waits for a pooled connection before PostgreSQL is probed (and waited for only if it answers).
GETCONN_QUICK_S = 1.0
#: While PostgreSQL is down, it is probed at most this often; calls between probes fail at once.
PROBE_EVERY_S = 1.0


def _lost(exc: BaseException) -> bool:
    """Whether an error means the connection to PostgreSQL is gone (not a bad statement)."""
    import psycopg

    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


class PostgresStore(TurnVectors):
    """:class:`pps_turns.TurnStore` on PostgreSQL."""

    #: Any number of PPS processes may serve one entity at once (unique message_id, advisory locks): when every
    #: layer of an entity is non-exclusive, Memory.open takes no owner lock (``Layer.exclusive``).
    exclusive = False
    derived_paths: tuple[str, ...] = ()

    def __init__(self, settings: PostgresSettings, entity: str) -> None:
        from .retrieval import TurnIndex
        from .textsearch import CorpusStats

        self.settings = settings
        self.schema = schema_for(self.settings, entity)
        self.entity = entity
        self.pool = None
        self.lock_key = CAPTURE_LOCK + self.schema
        self.corpus_stats = CorpusStats()  # BM25's N and mean length, refreshed every 10 s
        self.dense = TurnIndex(self)  # turn vectors are searched by PostgreSQL (pgvector HNSW), none held here
        self._waiting: list[tuple[list[dict[str, Any]], Any]] = []  # captures waiting for the next group commit
        self._writing = False
        self._writer: Any = None
        self._down: str | None = None  # why PostgreSQL was last found unreachable, None while it answers
        self._probed_at = 0.0
        self._probing = asyncio.Lock()

    @classmethod
    def for_memory(cls, memory) -> PostgresStore:
        return cls(memory.settings.plugin_settings(PostgresSettings, "postgres"), memory.settings.entity)

    @property
    def detail(self) -> str:
        from psycopg.conninfo import conninfo_to_dict

        try:
            info = conninfo_to_dict(self.settings.dsn)
        except Exception:
            info = {}
        where = f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"
        return f"postgresql {where} schema {self.schema}"

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        from psycopg_pool import AsyncConnectionPool

        if not self.settings.dsn:
            from pps_core.errors import ConfigError

            raise ConfigError("postgres.dsn is not set (a libpq URI, e.g. postgresql://pps@db.example/pps)")
        from .pooler import refuse_transaction_pooling

        await refuse_transaction_pooling(self.settings.dsn, self.settings.connect_timeout_s)  # PgBouncer: session mode
        schema = self.schema
        sync = self.settings.synchronous_commit
        ef_search = self.settings.hnsw_ef_search

        async def configure(conn: AsyncConnection) -> None:
            await conn.set_autocommit(True)
            await conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
            await conn.execute("SET TIME ZONE 'UTC'")
            await conn.execute(sql.SQL("SET synchronous_commit TO {}").format(sql.Literal(sync)))
            # the turn search's HNSW breadth for the session: a search needs no transaction to set it
            await conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef_search)))

        self.pool = AsyncConnectionPool(self.settings.dsn, min_size=self.settings.pool_min,
                                        max_size=self.settings.pool_max, open=False, configure=configure,
                                        timeout=self.settings.connect_timeout_s, kwargs={"row_factory": dict_row})
        await self.pool.open(wait=True, timeout=self.settings.connect_timeout_s)
        async with self.pool.connection() as conn:
            before, after = await migrate(conn, schema, upgrade=self.settings.auto_upgrade,
                                          entity=self.entity)  # else pps db upgrade
            if 0 < before < NO_STATISTICS_VERSION <= after:  # statistics that held turn text were removed
                why = await rewrite_statistics(conn)
                if why:
                    log.warning("%s: %s", schema, why)
            await conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))

    async def close(self) -> None:
        await self.dense.close()
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    @asynccontextmanager
    async def connection(self):
        """A pooled connection. PostgreSQL unreachable is :class:`Unavailable` (503) at once, not a 500 after the
        pool's timeout: a connection lost mid-call marks the server down, and while it is down calls fail without
        waiting (it is probed again at most once a second); a pool that gives no connection within a second is
        probed too, and waited for only if the server answers (busy, not down)."""
        pool = self.pool
        if pool is None:
            raise Unavailable("postgres store is not open")
        if self._down is not None:
            await self._recheck()
        conn = await self._getconn(pool)
        try:
            yield conn
        except Exception as exc:
            if _lost(exc):
                self._mark_down(exc)
                raise Unavailable(UNREACHABLE) from None
            raise
        finally:
            await pool.putconn(conn)

    async def _getconn(self, pool):
        from psycopg_pool import PoolTimeout

        budget = self.settings.connect_timeout_s
        try:
            return await pool.getconn(timeout=min(budget, GETCONN_QUICK_S))
        except PoolTimeout:
            pass
        why = await self._probe()
        if why is not None:
            self._mark_down(why)
            raise Unavailable(UNREACHABLE)
        try:
            return await pool.getconn(timeout=max(budget - GETCONN_QUICK_S, 0.1))
        except PoolTimeout:
            raise Unavailable(f"PostgreSQL: every connection of this server ({pool.max_size}, [postgres] pool_max) "
                              f"stayed busy for {budget:g} s; try again") from None

    async def _probe(self) -> str | None:
        """A new connection of its own and ``SELECT 1``: None when PostgreSQL answers, else why not."""
        import psycopg

        try:
            conn = await psycopg.AsyncConnection.connect(
                self.settings.dsn, autocommit=True, connect_timeout=max(2, min(int(self.settings.connect_timeout_s), 5)))
            async with conn:
                await conn.execute("SELECT 1")
        except (psycopg.Error, OSError) as exc:
            return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        return None

    def _mark_down(self, why: BaseException | str) -> None:
        import time

        if self._down is None:
            log.warning("PostgreSQL unreachable (%s): calls answer 503 until it is back", why)
        self._down = str(why)
        self._probed_at = time.monotonic()

    async def _recheck(self) -> None:
        """While PostgreSQL is down: raise :class:`Unavailable` at once, or (at most once a second) probe it; once
        it answers, the pool drops the connections the outage cut and calls go on."""
        import time

        async with self._probing:
            if self._down is None:
                return
            if time.monotonic() - self._probed_at < PROBE_EVERY_S:
                raise Unavailable(UNREACHABLE)
            why = await self._probe()
            if why is not None:
                self._mark_down(why)
                raise Unavailable(UNREACHABLE)
            self._down = None
            log.warning("PostgreSQL is back")
            if self.pool is not None:
                await self.pool.check()

    @asynccontextmanager
    async def claim_job(self, job: str):
        """``memory.claim(job)`` (:class:`pps_core.contracts.JobClaims`): a session advisory lock on a connection of
        its own, outside the pool, held for the block; True in one process at a time. A process that dies loses
        its connection, and the lock with it."""
        import psycopg

        if self._down is not None:
            await self._recheck()
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.settings.dsn, autocommit=True, connect_timeout=max(2, int(self.settings.connect_timeout_s)))
        except (psycopg.Error, OSError) as exc:
            self._mark_down(exc)
            raise Unavailable(UNREACHABLE) from None
        async with conn:
            row = await (await conn.execute("SELECT pg_try_advisory_lock(hashtext(%s), hashtext(%s))",
                                            (JOB_LOCK + self.schema, job))).fetchone()
            yield bool(row and row[0])

    async def shared_get(self, key: str) -> str | None:
        """:class:`pps_core.contracts.SharedValues`: one small value every server of the entity reads."""
        rows = await self.fetch("SELECT value FROM shared_values WHERE key = %s", (key,))
        return rows[0]["value"] if rows else None

    async def shared_put(self, key: str, value: str) -> None:
        async with self.connection() as conn:
            await conn.execute("INSERT INTO shared_values (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                               "SET value = EXCLUDED.value, updated_at = now()", (key, value))

    async def shared_prune(self, prefix: str, older_than_s: float) -> int:
        """:class:`pps_core.contracts.PrunableSharedValues`: the values under ``prefix`` empty or not put lately."""
        async with self.connection() as conn:
            return (await conn.execute("DELETE FROM shared_values WHERE left(key, length(%s)) = %s AND (value = '' OR "
                                       "updated_at < now() - make_interval(secs => %s))",
                                       (prefix, prefix, older_than_s))).rowcount

    async def ready(self) -> str | None:
        """Readiness (``/ready``): None when PostgreSQL answers now, else why not (no address in it)."""
        import time

        if self.pool is None:
            return "not open"
        if self._down is None:
            if time.monotonic() - self._probed_at < PROBE_EVERY_S:
                return None
            why = await self._probe()
            if why is None:
                self._probed_at = time.monotonic()
                return None
            self._mark_down(why)
        try:
            await self._recheck()
        except Unavailable:
            return UNREACHABLE
        return None

    async def fetch(self, query, args=()) -> list[dict[str, Any]]:
        async with self.connection() as conn:
            return await (await conn.execute(query, args)).fetchall()

    # -- turns ----------------------------------------------------------------------------------

    async def store(self, batch):
        """Group commit: captures that arrive while one is being written join the next transaction together (one
        WAL flush for all of them); each caller gets its own acks once that transaction committed, so an ack still
        means durable. A group that fails is written again batch by batch, so one bad batch fails alone."""
        import asyncio

        done = asyncio.get_running_loop().create_future()
        self._waiting.append((list(batch), done))
        if not self._writing:  # the writer is a task of its own: a caller that goes away leaves the others served
            self._writing = True
            self._writer = asyncio.create_task(self._drain())
        return await asyncio.shield(done)

    async def _drain(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                await self._commit_group(group)
        finally:
            self._writing = False

    async def _commit_group(self, group) -> None:
        if len(group) > 1:
            combined = [t for b, _f in group for t in b]
            try:
                acks, new = await self._store_now(combined)
            except Exception:  # noqa: BLE001 - each batch is tried alone below, and fails alone
                pass
            else:
                new_ids = {t["id"]: t for t in new}
                at = 0
                for b, fut in group:
                    mine = acks[at:at + len(b)]
                    at += len(b)
                    fresh = [new_ids.pop(a["id"]) for a in mine if a.get("id") in new_ids]
                    if not fut.done():
                        fut.set_result((mine, fresh))
                return
        for b, fut in group:
            try:
                result = await self._store_now(b)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                if not fut.done():
                    fut.set_exception(exc)
            else:
                if not fut.done():
                    fut.set_result(result)

    async def _store_now(self, batch):
        """One transaction of three statements, sent in one pipeline: the shared capture lock, then one multi-row
        INSERT (``unnest`` of column arrays) that skips message ids already stored, turns stored without one that
        come back with one (the same :func:`pps_turns.turn_digest`) and tombstoned ones, takes ids in input order
        (volatile ``nextval`` runs after the ORDER BY) and flags the summaries each new turn falls inside, all in one
        statement; then COMMIT (acknowledged once the WAL is flushed: ``synchronous_commit``). Only a repeat needs
        more queries (the first row, for its ack; or its tombstone)."""
        keys = [turn_digest(t) for t in batch]
        seen_mids: set[str] = set()
        plain_keys: set[str] = set()  # turns of the batch without a message_id, by turn digest
        fresh: list[int] = []  # the first of each message id, and no turn the batch has without an id already
        for i, t in enumerate(batch):
            mid = t.get("message_id")
            if mid is not None and (mid in seen_mids or keys[i] in plain_keys):
                continue
            if mid is not None:
                seen_mids.add(mid)
            else:
                plain_keys.add(keys[i])
            fresh.append(i)
        cols: list[list[Any]] = [[] for _ in range(9)]
        for i in fresh:
            t = batch[i]
            mid = t.get("message_id")
            for col, value in zip(cols, (i, mid, None if mid is None else digest(mid), keys[i], t["content"],
                                         t["author_name"], t["channel"], t.get("session_id"),
                                         from_storage(t["created_at"])), strict=True):
                col.append(value)
        metas = [json.dumps(batch[i].get("metadata") or {}, ensure_ascii=False) for i in fresh]
        fresh_set = set(fresh)
        async with self.connection() as conn:
            async with conn.pipeline(), conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock_shared(hashtext(%s))", (self.lock_key,))
                cur = await conn.execute(INSERT_BATCH, (*cols, metas))
                rows = await cur.fetchall()
                inserted: dict[tuple[str, str | None], list[dict[str, Any]]] = {}  # in id order: the batch's order
                for r in sorted(rows, key=lambda r: r["id"]):
                    inserted.setdefault((turn_digest(row_to_turn(r)), r["message_id"]), []).append(r)
                rest = [i for i in range(len(batch))
                        if i not in fresh_set or (keys[i], batch[i].get("message_id")) not in inserted]
                by_mid = {r["message_id"]: r for r in rows if r["message_id"] is not None}
                by_key: dict[str, list[dict[str, Any]]] = {}
                for r in rows:
                    by_key.setdefault(turn_digest(row_to_turn(r)), []).append(r)
                forgotten: set[str] = set()
                if rest:  # stored before (or by another server meanwhile, or earlier in the batch), or forgotten
                    mids = sorted({batch[i]["message_id"] for i in rest if batch[i].get("message_id") is not None}
                                  - set(by_mid))
                    if mids:
                        found = await (await conn.execute(f"SELECT {COLUMNS} FROM messages WHERE message_id = ANY(%s)",
                                                          (mids,))).fetchall()
                        by_mid.update({r["message_id"]: r for r in found})
                    marks = sorted({d for i in rest for d in tombstones(batch[i])})
                    found = await (await conn.execute(
                        "SELECT digest FROM forgotten_message_ids WHERE digest = ANY(%s)", (marks,))).fetchall()
                    forgotten = {r["digest"] for r in found}
                    same = [i for i in rest if batch[i].get("message_id") is not None
                            and batch[i]["message_id"] not in by_mid]
                    if same:
                        found = await (await conn.execute(
                            f"SELECT {COLUMNS} FROM messages WHERE (created_at, channel, author_name, content) IN "
                            "(SELECT * FROM unnest(%s::timestamptz[], %s::text[], %s::text[], %s::text[])) ORDER BY id",
                            ([from_storage(batch[i]["created_at"]) for i in same],
                             [batch[i]["channel"] for i in same], [batch[i]["author_name"] for i in same],
                             [batch[i]["content"] for i in same]))).fetchall()
                        known = {r["id"] for rs in by_key.values() for r in rs}
                        for r in found:
                            if r["id"] not in known:
                                by_key.setdefault(turn_digest(row_to_turn(r)), []).append(r)
        acks: list[dict[str, Any]] = []
        new: list[dict[str, Any]] = []
        for i, t in enumerate(batch):
            mid = t.get("message_id")
            group = inserted.get((keys[i], mid)) if i in fresh_set else None
            row = group.pop(0) if group else None
            if row is not None:
                turn = row_to_turn(row)
                new.append(turn)
                ack = {k: turn[k] for k in ("id", "message_id", "created_at", "channel")}
                if row["inside"]:
                    ack["inside_summaries"] = list(row["inside"])
                acks.append(ack)
                continue
            earlier = by_mid.get(mid) if mid is not None else None
            if earlier is None and not any(d in forgotten for d in tombstones(t)):
                earlier = next((r for r in sorted(by_key.get(keys[i], []), key=lambda r: r["id"])
                                if r["message_id"] is None and mid is not None), None)
            if earlier is not None:  # a repeat: answered as the first was
                turn = row_to_turn(earlier)
                acks.append({k: turn[k] for k in ("id", "message_id", "created_at", "channel")})
            elif any(d in forgotten for d in tombstones(t)):
                acks.append(forgotten_ack(t))
            else:  # pragma: no cover - the row was stored and forgotten between the two statements
                raise Conflict(f"store: message_id {mid!r} changed while it was stored; send it again",
                               param="message_id")
        return acks, new

    async def turns_by_ids(self, ids) -> list[dict[str, Any]]:
        async with self.connection() as conn:
            return await self._by_ids(conn, list(ids))

    async def author_names(self) -> list[str]:
        return [r["author_name"] for r in await self.fetch("SELECT DISTINCT author_name FROM messages")]

    async def _by_ids(self, conn, ids: list[int]) -> list[dict[str, Any]]:
        if not ids:
            return []
        rows = await (await conn.execute(f"SELECT {COLUMNS} FROM messages WHERE id = ANY(%s)", (ids,))).fetchall()
        by = {r["id"]: row_to_turn(r) for r in rows}
        return [by[i] for i in ids if i in by]

    async def newest(self, limit):
        rows = await self.fetch(f"SELECT {COLUMNS} FROM messages ORDER BY created_at DESC, id DESC LIMIT %s",
                                (limit,))
        return [row_to_turn(r) for r in reversed(rows)]

    async def counts(self):
        r = (await self.fetch(  # kept by triggers (schema v6): a few rows, however many turns
            "SELECT coalesce(sum(messages), 0) AS total, coalesce(sum(unsummarized), 0) AS unsummarized, "
            "coalesce(sum(uningested), 0) AS uningested, (SELECT count(*) FROM read_cursors) AS cursors "
            "FROM turn_counts"))[0]
        return {"total": r["total"], "unsummarized": r["unsummarized"], "uningested": r["uningested"],
                "cursors": r["cursors"]}

    async def _unsummarized(self, conn, limit, offset=0, *, oldest_first=False, channel=None):
        where = "summary_id IS NULL" + (" AND channel = %s" if channel else "")
        args: list[Any] = [channel] if channel else []
        order = "ASC" if oldest_first else "DESC"
        rows = await (await conn.execute(
            f"SELECT {COLUMNS} FROM messages WHERE {where} ORDER BY created_at {order}, id {order} "
            "LIMIT %s OFFSET %s",
            [*args, limit, offset])).fetchall()
        out = [row_to_turn(r) for r in rows]
        if not oldest_first:
            out.reverse()
        return out

    async def _unsummarized_count(self, conn, channel=None) -> int:
        if channel:
            cur = await conn.execute("SELECT count(*) AS n FROM messages WHERE summary_id IS NULL AND channel = %s",
                                     (channel,))
        else:
            cur = await conn.execute("SELECT count(*) AS n FROM messages WHERE summary_id IS NULL")
        return (await cur.fetchone())["n"]

    async def unsummarized_page(self, limit, offset=0, *, oldest_first=False, channel=None):
        async with self.connection() as conn, conn.transaction():
            if oldest_first:
                # what a summarizer is handed: no turn still uncommitted may later land inside its id range
                # (ids commit out of order across servers); as in poll, captures in flight commit first
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.lock_key,))
            else:
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            total = await self._unsummarized_count(conn, channel)
            page = await self._unsummarized(conn, limit, offset, oldest_first=oldest_first, channel=channel)
        return total, page

    async def since(self, ts_, limit, include_summaries):
        at = from_storage(ts_)
        async with self.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            rows = await (await conn.execute(
                f"SELECT {COLUMNS} FROM messages WHERE created_at >= %s ORDER BY created_at, id LIMIT %s",
                (at, limit + 1))).fetchall()
            sums = []
            if include_summaries:
                sums = await (await conn.execute(
                    f"SELECT {SUMMARY_COLUMNS} FROM message_summaries WHERE time_span_end >= %s "
                    "ORDER BY time_span_start, id", (at,))).fetchall()
        return [row_to_turn(r) for r in rows[:limit]], len(rows) > limit, [row_to_summary(s) for s in sums]

    async def around(self, ts_, before, after):
        at = from_storage(ts_)
        total = before + after
        async with self.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            b = await (await conn.execute(
                f"SELECT {COLUMNS} FROM messages WHERE created_at < %s ORDER BY created_at DESC, id DESC LIMIT %s",
                (at, total))).fetchall()
            a = await (await conn.execute(
                f"SELECT {COLUMNS} FROM messages WHERE created_at >= %s ORDER BY created_at, id LIMIT %s",
                (at, total))).fetchall()
        if len(b) < before:
            after += before - len(b)
        if len(a) < after:
            before += after - len(a)
        b, a = b[:before], a[:after]
        return [row_to_turn(r) for r in reversed(b)], [row_to_turn(r) for r in a]

    async def context(self, wanted, per_summary):
        async with self.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            count = await self._unsummarized_count(conn)
            n_raw, n_sums = context_plan(count, wanted, per_summary)
            raw = await self._unsummarized(conn, n_raw) if n_raw != 0 else []
            sums = await self._recent_summaries(conn, n_sums) if n_sums else []
        return count, sums[::-1], raw

    async def poll(self, consumer, channel, limit, *, newest_first_preview=False):
        async with self.connection() as conn, conn.transaction():
            # every capture in flight commits before the newest id is read: no smaller id can appear later
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.lock_key,))
            row = await (await conn.execute("SELECT last_id FROM read_cursors WHERE consumer_key = %s FOR UPDATE",
                                            (consumer,))).fetchone()
            top = (await (await conn.execute("SELECT COALESCE(max(id), 0) AS top FROM messages")).fetchone())["top"]
            if row is None:
                created = await conn.execute(
                    "INSERT INTO read_cursors (consumer_key, last_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (consumer, top))
                if created.rowcount != 1:
                    raise Conflict(f"consumer {consumer!r} was read concurrently; poll again")
                return {"consumer_key": consumer, "new_consumer": True, "unread_total": 0, "turns": [],
                        "remaining": 0, "cursor": top}
            last = row["last_id"]
            other = "channel <> %s" if channel else "true"
            args: list[Any] = [channel] if channel else []
            total = (await (await conn.execute(
                f"SELECT count(*) AS n FROM messages WHERE id > %s AND id <= %s AND {other}",
                [last, top, *args])).fetchone())["n"]
            oldest = None
            if newest_first_preview:
                rows = (await (await conn.execute(
                    f"SELECT {COLUMNS} FROM messages WHERE id > %s AND id <= %s AND {other} "
                    "ORDER BY created_at DESC, id DESC LIMIT %s",
                    [last, top, *args, limit])).fetchall())[::-1]
                if total > len(rows):
                    oldest = ts((await (await conn.execute(
                        f"SELECT min(created_at) AS m FROM messages WHERE id > %s AND id <= %s AND {other}",
                        [last, top, *args])).fetchone())["m"])
                cursor = top
            else:
                rows = await (await conn.execute(
                    f"SELECT {COLUMNS} FROM messages WHERE id > %s AND id <= %s AND {other} ORDER BY id LIMIT %s",
                    [last, top, *args, limit])).fetchall()
                cursor = top if len(rows) >= total else rows[-1]["id"]
            await conn.execute("UPDATE read_cursors SET last_id = %s, updated_at = now() WHERE consumer_key = %s",
                               (cursor, consumer))
            found = sorted((row_to_turn(r) for r in rows), key=lambda t: (t["created_at"], t["id"]))
        return {"consumer_key": consumer, "new_consumer": False, "unread_total": total, "turns": found,
                "remaining": total - len(found) if not newest_first_preview else 0, "cursor": cursor,
                "oldest_unread_at": oldest}

    async def pending_ingestion(self, limit):
        rows = await self.fetch(f"SELECT {COLUMNS} FROM messages WHERE ingested_at IS NULL ORDER BY id LIMIT %s",
                                (limit,))
        return [row_to_turn(r) for r in rows]

    async def mark_ingested(self, ids):
        if not ids:
            return 0
        async with self.connection() as conn:
            cur = await conn.execute("UPDATE messages SET ingested_at = now() WHERE ingested_at IS NULL "
                                     "AND id = ANY(%s)", (list(ids),))
            return cur.rowcount

    # -- backup and restore (pps_turns.ArchivableTurnStore) ---------------------------------------

    async def _version(self, conn) -> int:
        return (await (await conn.execute("SELECT max(version) AS v FROM pps_schema_version")).fetchone())["v"] or 0

    async def export_rows(self, dest):
        """Every turn table as COPY text, from one snapshot (:mod:`.archive`)."""
        from . import archive

        async with self.connection() as conn:
            return await archive.export(conn, self.schema, await self._version(conn), dest)

    def exported_counts(self, dest):
        """The counts :meth:`export_rows` took with its rows (:func:`.archive.exported_counts`)."""
        from . import archive

        return archive.exported_counts(dest)

    async def import_rows(self, home):
        """The archive's rows into this (empty) schema, in one transaction checked table by table (:mod:`.archive`)."""
        from . import archive

        manifest = archive.read_manifest(home)
        if manifest is None:
            return None
        async with self.connection() as conn:
            loaded = await archive.load(conn, self.schema, await self._version(conn), self.lock_key, home, manifest)
            for table in loaded:  # fresh statistics for the planner
                await conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
        self.dense.forget()  # the index is looked up again (made in the background if the schema lacks it)
        archive.remove(home)
        return loaded

    # -- browsing (list_turns, turn_activity: pps_turns.BrowsableTurnStore) -----------------------

    async def list_turns(self, *, since, until, channel, author, ids, newest_first, limit, offset):
        clauses, args = [], []
        if since:
            clauses.append("created_at >= %s")
            args.append(from_storage(since))
        if until:
            clauses.append("created_at < %s")
            args.append(from_storage(until))
        if channel:
            clauses.append("(channel = %s OR left(channel, %s) = %s)")
            args += [channel, len(channel) + 1, channel + ":"]
        if author:
            clauses.append("lower(author_name) = lower(%s)")
            args.append(author)
        if ids:
            clauses.append("id = ANY(%s)")
            args.append(list(ids))
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        order = "DESC" if newest_first else "ASC"
        async with self.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # the total and the page agree
            total = (await (await conn.execute(f"SELECT count(*) AS n FROM messages{where}", args)).fetchone())["n"]
            rows = await (await conn.execute(f"SELECT {COLUMNS} FROM messages{where} ORDER BY created_at {order}, "
                                             f"id {order} LIMIT %s OFFSET %s", [*args, limit, offset])).fetchall()
        return total, [row_to_turn(r) for r in rows]

    async def activity(self, start, end, width):
        """As ``pps_sqlite``: buckets are the first ``width`` characters of the canonical UTC time."""
        bucket = "left(to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS'), %s)"
        lo, hi, width = from_storage(start), from_storage(end), int(width)
        async with self.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            turns = await (await conn.execute(
                f"SELECT {bucket} AS b, channel, count(*) AS n FROM messages WHERE created_at >= %s "
                "AND created_at < %s GROUP BY 1, 2", (width, lo, hi))).fetchall()
            before = (await (await conn.execute(
                "SELECT (SELECT count(*) FROM messages WHERE created_at < %s) - (SELECT COALESCE(sum(message_count), 0) "
                "FROM message_summaries WHERE created_at < %s) AS n", (lo, lo))).fetchone())["n"]
            summed = await (await conn.execute(
                f"SELECT {bucket} AS b, sum(message_count) AS n FROM message_summaries WHERE created_at >= %s "
                "AND created_at < %s GROUP BY 1", (width, lo, hi))).fetchall()
        return ([(r["b"], r["channel"], r["n"]) for r in turns], int(before),
                [(r["b"], int(r["n"])) for r in summed])

    # -- forgetting -----------------------------------------------------------------------------

    async def in_range(self, channel, since, until):
        rows = await self.fetch(
            "SELECT id FROM messages WHERE created_at >= %s AND created_at < %s AND (channel = %s OR "
            "left(channel, %s) = %s) ORDER BY created_at, id",
            (from_storage(since), from_storage(until), channel, len(channel) + 1, channel + ":"))
        return [r["id"] for r in rows]

    async def forget(self, ids, who, how, owed=()):
        """As ``pps_sqlite``: turns, the summaries that covered them (their turns back to the backlog),
        their tombstones (what each turn is, and its message id), a log row of ids, the owed forget (``owed``); then
        VACUUM FULL (``forget_rewrite``), so the dead rows' bytes leave the table and index files."""
        ids = sorted(set(ids))
        owed = list(owed)
        owed_id = None
        async with self.connection() as conn, conn.transaction():
            rows = await (await conn.execute("SELECT id, summary_id, message_id, author_name, channel, created_at, "
                                             "content FROM messages WHERE id = ANY(%s) ORDER BY id", (ids,))).fetchall()
            found = sorted(r["id"] for r in rows)
            # the rows derived from the turns first, in the order a vector claim takes them (backlog, vectors, then
            # the turns): a claim met half-way is waited for, not deadlocked with (issue 37)
            for table in ("vector_backlog", "message_vectors"):
                await conn.execute(sql.SQL("SELECT 1 FROM {} WHERE message_id = ANY(%s) ORDER BY message_id "
                                           "FOR UPDATE").format(sql.Identifier(table)), (found,))
            summaries = sorted({r["summary_id"] for r in rows if r["summary_id"] is not None})
            gone_covered = sum(1 for r in rows if r["summary_id"] is not None)
            returned = 0
            if summaries:
                cur = await conn.execute("UPDATE messages SET summary_id = NULL WHERE summary_id = ANY(%s)",
                                         (summaries,))
                returned = cur.rowcount - gone_covered
            await conn.execute("DELETE FROM messages WHERE id = ANY(%s)", (found,))
            if summaries:
                await conn.execute("DELETE FROM message_summaries WHERE id = ANY(%s)", (summaries,))
            marks = [d for r in rows for d in tombstones({**r, "created_at": ts(r["created_at"])})]
            if marks:
                await conn.execute("INSERT INTO forgotten_message_ids (digest) SELECT unnest(%s::text[]) "
                                   "ON CONFLICT DO NOTHING", (marks,))
            if found:
                await conn.execute("INSERT INTO forget_log (who, how, turn_ids, summary_ids) VALUES (%s, %s, %s, %s)",
                                   (who, how, json.dumps(found), json.dumps(summaries)))
            if found and owed:
                owed_id = (await (await conn.execute(
                    "INSERT INTO owed_forgets (who, turn_ids, message_ids, texts, copies) VALUES (%s, %s, %s, %s, %s) "
                    "RETURNING id", (who, json.dumps(found), json.dumps(
                        [r["message_id"] for r in rows if r["message_id"] is not None], ensure_ascii=False),
                        json.dumps([r["content"] for r in rows], ensure_ascii=False), json.dumps(owed)))).fetchone())["id"]
        if found:  # the vectors went with their rows (ON DELETE CASCADE); VACUUM FULL rebuilds the HNSW index too
            await self._vacuum("messages", "message_vectors", "message_summaries", "summary_vectors")
        return {"forgotten": found, "not_found": sorted(set(ids) - set(found)), "summaries_removed": summaries,
                "returned_to_backlog": returned, "owed": owed_id}

    async def owed_forgets(self, texts=False):
        rows = await self.fetch(f"SELECT id, forgotten_at, who, turn_ids, message_ids, copies{', texts' if texts else ''} "
                                "FROM owed_forgets ORDER BY id")
        out = []
        for r in rows:
            item = {"id": r["id"], "forgotten_at": ts(r["forgotten_at"]), "who": r["who"],
                    "turn_ids": json.loads(r["turn_ids"]), "message_ids": json.loads(r["message_ids"]),
                    "copies": json.loads(r["copies"])}
            if texts:
                item["texts"] = json.loads(r["texts"])
            out.append(item)
        return out

    async def settle_forget(self, owed_id, confirmed):
        """Strike confirmed copies off; the last one deletes the row and VACUUM FULL rewrites the table without
        its bytes."""
        async with self.connection() as conn, conn.transaction():
            row = await (await conn.execute("SELECT copies FROM owed_forgets WHERE id = %s FOR UPDATE",
                                            (owed_id,))).fetchone()
            if row is None:
                return []
            left = [c for c in json.loads(row["copies"]) if c not in set(confirmed)]
            if left:
                await conn.execute("UPDATE owed_forgets SET copies = %s WHERE id = %s", (json.dumps(left), owed_id))
            else:
                await conn.execute("DELETE FROM owed_forgets WHERE id = %s", (owed_id,))
        if not left or confirmed:
            await self._vacuum("owed_forgets")
        return left

    async def _vacuum(self, *tables: str) -> None:
        """Dead rows keep their bytes in the table files until the pages are reused; VACUUM FULL writes new files
        without them (outside a transaction)."""
        from psycopg import sql

        try:
            async with self.connection() as conn:  # the pool's connections are in autocommit
                for table in tables:
                    await conn.execute(sql.SQL("VACUUM FULL {}" if self.settings.forget_rewrite else "VACUUM {}")
                                       .format(sql.Identifier(table)))
        except Exception as exc:  # forgetting is done; the bytes go at the next autovacuum
            log.warning("VACUUM after forgetting did not run: %s: %s", type(exc).__name__, exc)

    async def save_forget_token(self, token_digest, query_digest, ids, expires_at, now):
        async with self.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM forget_tokens WHERE expires_at <= %s", (now,))
            await conn.execute("INSERT INTO forget_tokens (digest, query_digest, turn_ids, expires_at) "
                               "VALUES (%s, %s, %s, %s)", (token_digest, query_digest, json.dumps(list(ids)),
                                                           expires_at))

    async def take_forget_token(self, token_digest, query_digest, now):
        async with self.connection() as conn, conn.transaction():
            row = await (await conn.execute(
                "DELETE FROM forget_tokens WHERE digest = %s AND query_digest = %s AND expires_at > %s "
                "RETURNING turn_ids", (token_digest, query_digest, now))).fetchone()
        return json.loads(row["turn_ids"]) if row else None

    async def forget_log(self, limit, offset=0):
        total = (await self.fetch("SELECT count(*) AS n FROM forget_log"))[0]["n"]
        rows = await self.fetch("SELECT id, forgotten_at, who, how, turn_ids, summary_ids FROM forget_log "
                                "ORDER BY id DESC LIMIT %s OFFSET %s", (limit, offset))
        return total, [{"id": r["id"], "forgotten_at": ts(r["forgotten_at"]), "who": r["who"], "how": r["how"],
                        "turn_ids": json.loads(r["turn_ids"]), "summaries_removed": json.loads(r["summary_ids"])}
                       for r in rows]

    # -- summaries ------------------------------------------------------------------------------

    async def store_summary(self, text, *, start_id, end_id, message_ids, channels, summary_type, created_at=None):
        async with self.connection() as conn, conn.transaction():
            if message_ids:
                ids = sorted(set(message_ids))
                rows = await (await conn.execute(
                    "SELECT id, channel, created_at, summary_id FROM messages WHERE id = ANY(%s) ORDER BY id",
                    (ids,))).fetchall()
                found = {r["id"] for r in rows}
                missing = [i for i in ids if i not in found]
                if missing:
                    raise NotFound(f"store_summary: message_ids not found: {missing[:10]}", param="message_ids")
            else:
                if start_id is None or end_id is None:
                    raise InvalidParams("store_summary: give message_ids, or both start_id and end_id",
                                        param="start_id")
                if start_id > end_id:
                    raise InvalidParams(f"store_summary: reversed range: start_id {start_id} > end_id {end_id}",
                                        param="start_id")
                rows = await (await conn.execute(
                    "SELECT id, channel, created_at, summary_id FROM messages WHERE id BETWEEN %s AND %s ORDER BY id",
                    (start_id, end_id))).fetchall()
                if not rows:
                    raise NotFound(f"store_summary: no turns with ids {start_id}..{end_id}", param="start_id")
            done = [r["id"] for r in rows if r["summary_id"] is not None]
            if done:
                raise Conflict(f"store_summary: turns already summarized: {done[:10]}"
                               f"{' ...' if len(done) > 10 else ''}; nothing was stored", param="start_id")
            ids = [r["id"] for r in rows]
            times = sorted(r["created_at"] for r in rows)
            chans = channels or sorted({r["channel"] for r in rows})
            row = await (await conn.execute(
                "INSERT INTO message_summaries (summary_text, start_id, end_id, message_count, channels, "
                "time_span_start, time_span_end, summary_type, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
                f"COALESCE(%s::timestamptz, now())) RETURNING {SUMMARY_COLUMNS}",
                (text, min(ids), max(ids), len(ids), json.dumps(chans), times[0], times[-1], summary_type,
                 created_at))).fetchone()
            marked = await conn.execute("UPDATE messages SET summary_id = %s WHERE summary_id IS NULL AND id = ANY(%s)",
                                        (row["id"], ids))
            if marked.rowcount != len(ids):  # another server got there first: the transaction rolls back
                raise Conflict("store_summary: some turns were summarized concurrently; nothing was stored")
        return row_to_summary(row)

    async def _recent_summaries(self, conn, limit, offset=0):
        rows = await (await conn.execute(
            f"SELECT {SUMMARY_COLUMNS} FROM message_summaries ORDER BY time_span_end DESC NULLS LAST, id DESC "
            "LIMIT %s OFFSET %s",
            (limit, offset))).fetchall()
        return [row_to_summary(r) for r in rows]

    async def recent_summaries(self, limit, offset=0):
        async with self.connection() as conn:
            return await self._recent_summaries(conn, limit, offset)

    async def summaries_by_ids(self, ids: list[int]) -> list[dict[str, Any]]:
        rows = await self.fetch(f"SELECT {SUMMARY_COLUMNS} FROM message_summaries WHERE id = ANY(%s)", (list(ids),))
        return [row_to_summary(r) for r in rows]

    async def summary_stats(self):
        async with self.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            r = await (await conn.execute(
                "SELECT (SELECT count(*) FROM messages) AS total, "
                "(SELECT count(*) FROM messages WHERE summary_id IS NULL) AS unsummarized, "
                "(SELECT count(*) FROM message_summaries) AS summaries, "
                "(SELECT min(created_at) FROM messages WHERE summary_id IS NULL) AS oldest_unsummarized, "
                "(SELECT max(created_at) FROM message_summaries) AS newest_summary")).fetchone()
            by = await (await conn.execute(
                "SELECT channel, count(*) AS n FROM messages WHERE summary_id IS NULL GROUP BY channel "
                "ORDER BY 2 DESC, 1")).fetchall()
        rewrite = await self.needs_rewrite()
        return {"needs_rewrite": rewrite, "total_messages": r["total"], "unsummarized_count": r["unsummarized"],
                "summarized_count": r["total"] - r["unsummarized"], "summary_count": r["summaries"],
                "oldest_unsummarized_at": ts(r["oldest_unsummarized"]), "newest_summary_at": ts(r["newest_summary"]),
                "unsummarized_by_channel": {x["channel"]: x["n"] for x in by}}

    async def needs_rewrite(self):
        rows = await self.fetch("SELECT id, rewrite FROM message_summaries WHERE rewrite IS NOT NULL ORDER BY id")
        return [{"id": r["id"], "reason": r["rewrite"]} for r in rows]

    async def summary_count(self):
        return (await self.fetch("SELECT count(*) AS n FROM message_summaries"))[0]["n"]

    # -- full text ------------------------------------------------------------------------------

    async def lexical_turns(self, terms, n, channel=None, budget=0):
        if not terms:
            return {}
        async with self.connection() as conn:
            return await bm25(conn, "messages", terms, n, channel, self.corpus_stats, budget)

    async def channel_neighbours(self, ids, reach):
        if not ids:
            return []
        # the nearest two on each side only (what links_from_rows keeps), each from the (channel, id) index
        rows = await self.fetch(
            "SELECT m.id AS a, n.id AS b FROM messages m, LATERAL ("
            "(SELECT p.id FROM messages p WHERE p.channel = m.channel AND p.id < m.id AND p.id >= m.id - %(r)s "
            "ORDER BY p.id DESC LIMIT 2) UNION ALL "
            "(SELECT p.id FROM messages p WHERE p.channel = m.channel AND p.id > m.id AND p.id <= m.id + %(r)s "
            "ORDER BY p.id LIMIT 2)) n WHERE m.id = ANY(%(ids)s)", {"r": reach, "ids": [int(i) for i in ids]})
        return [(r["a"], r["b"]) for r in rows]

    async def term_counts(self, terms, cap):
        from .textsearch import term_counts

        async with self.connection() as conn:
            return await term_counts(conn, "messages", terms, cap, self.corpus_stats)

    async def lexical_summaries(self, query, n):
        async with self.connection() as conn:
            scores = await bm25(conn, "message_summaries", content_terms(query), n, stats=self.corpus_stats)
            rows = await (await conn.execute(f"SELECT {SUMMARY_COLUMNS} FROM message_summaries WHERE id = ANY(%s)",
                                             (list(scores),))).fetchall() if scores else []
        by = {r["id"]: row_to_summary(r) for r in rows}
        return [{**by[i], "score": round(s, 6)}
                for i, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])) if i in by]

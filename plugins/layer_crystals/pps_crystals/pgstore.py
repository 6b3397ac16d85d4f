"""Crystals in PostgreSQL (``[crystals] store = "postgres"``): one table shared by every server of an entity.

Same operations and names as the files (``crystal_NNN.md``); the window is not a folder but the newest ``window``
live crystals, so rolling and refilling are nothing to do. Numbers come from ``max(number) + 1`` under a
transaction-scoped advisory lock: two servers crystallizing at once get consecutive numbers, never the same one,
and no gap. A deleted crystal keeps its row (state ``deleted``), a forgotten one keeps its number with no text
(state ``forgotten``), so a number is never handed out twice. The markdown files are an export kept in step by
``pps crystals sync`` (:mod:`pps_crystals.sync`), which also moves a file store into the table.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

from pps_core import Layer, LayerHealth, Pointer, SearchResult, SectionConfig, StartupItems
from pps_core.errors import ConfigError, Conflict, NotFound, Unavailable
from pps_core.textsearch import lexical_scores_tokens, tokens
from pps_core.timeutil import to_storage

from .layer import CrystalSettings, crystal_name

MIGRATIONS = [
    """
    CREATE TABLE crystals (
        number integer PRIMARY KEY CHECK (number > 0),
        content text NOT NULL,
        state text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'deleted', 'forgotten')),
        version integer NOT NULL DEFAULT 1,
        created_at timestamptz NOT NULL DEFAULT now(),
        modified_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX idx_crystals_live ON crystals(number) WHERE state = 'live';
    """,
    # 2: no planner statistics of a crystal's text: ANALYZE (autovacuum's) copied sampled values into pg_statistic,
    # where a forgotten crystal's words stayed (docs/PRIVACY.md)
    """
    ALTER TABLE crystals ALTER COLUMN content SET STATISTICS 0;
    DO $$
    DECLARE r record;
    BEGIN  -- what an ANALYZE stored before: a column altered to its own type loses it (no rewrite)
        FOR r IN SELECT s.tablename, s.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_stats s
                 JOIN pg_attribute a ON a.attrelid = format('%I.%I', s.schemaname, s.tablename)::regclass
                                    AND a.attname = s.attname
                 WHERE s.schemaname = current_schema() AND (s.tablename, s.attname) IN (('crystals', 'content'))
                   AND (s.most_common_vals IS NOT NULL OR s.histogram_bounds IS NOT NULL)
        LOOP
            EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE %s', r.tablename, r.attname, r.type);
        END LOOP;
    END $$;
    """,
]
LIVE = "state = 'live'"
NO_STATISTICS_VERSION = 2


async def _rewrite_statistics(conn) -> None:
    """The statistics migration 2 removed are dead rows of ``pg_statistic`` whose bytes stay in its file until it
    is rewritten (``VACUUM FULL``), which only a superuser or the database's owner may do: else a warning says so."""
    refused: list[str] = []

    def notice(diag) -> None:
        if (diag.severity_nonlocalized or "") == "WARNING":
            refused.append(str(diag.message_primary or ""))

    conn.add_notice_handler(notice)
    try:
        await conn.set_autocommit(True)
        await conn.execute("VACUUM FULL pg_catalog.pg_statistic")
    except Exception as exc:  # the upgrade is done all the same
        refused.append(f"{type(exc).__name__}: {exc}")
    finally:
        conn.remove_notice_handler(notice)
        await conn.set_autocommit(False)
    if refused:
        logging.getLogger("pps.crystals").warning(
            "crystals: planner statistics removed from the table may keep crystal text in pg_statistic's file until "
            "its pages are reused (%s): have a superuser or the database owner run "
            "`VACUUM FULL pg_catalog.pg_statistic` once", refused[0])


async def _ping(conn) -> None:
    await conn.execute("SELECT 1")


def open_store(settings: CrystalSettings, entity_settings) -> CrystalStore:
    """The table of this entity: ``[crystals] dsn``/``schema``, each defaulting to ``[postgres]``'s, the schema named
    as every layer in PostgreSQL names it (``EntitySettings.database_place``)."""
    return CrystalStore(*entity_settings.database_place("crystals", settings.dsn, settings.schema_name, "postgres"))


class CrystalStore:
    """The table, over one connection of this process (crystals are few and small: calls take turns)."""

    def __init__(self, dsn: str, schema: str, connect_timeout_s: float = 10.0) -> None:
        if not dsn:
            raise ConfigError('crystals.dsn: store = "postgres" needs a dsn (or a [postgres] dsn), e.g. '
                              '"postgresql://pps@db/pps"')
        self.dsn = dsn
        self.schema = schema
        self.connect_timeout_s = connect_timeout_s
        self._conn: Any = None
        self._lock = asyncio.Lock()

    async def _connect(self):
        import psycopg
        from psycopg import sql

        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        conn = await psycopg.AsyncConnection.connect(self.dsn, connect_timeout=int(self.connect_timeout_s))
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-crystals-migrate'))")
            # shared by every plugin's migration, taken last: one CREATE SCHEMA at a time (pps_postgres.schema)
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-create-schema'))")
            await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            await conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(self.schema)))
            await conn.execute("CREATE TABLE IF NOT EXISTS crystals_schema_version (version integer NOT NULL)")
            row = await (await conn.execute("SELECT max(version) FROM crystals_schema_version")).fetchone()
            current = row[0] or 0
            if current > len(MIGRATIONS):
                raise ConfigError(f"crystals table v{current} is newer than this PPS (v{len(MIGRATIONS)}): upgrade PPS")
            for version in range(current + 1, len(MIGRATIONS) + 1):
                await conn.execute(MIGRATIONS[version - 1])
                await conn.execute("INSERT INTO crystals_schema_version (version) VALUES (%s)", (version,))
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        await conn.commit()
        if 0 < current < NO_STATISTICS_VERSION:  # statistics that held crystal text were removed
            await _rewrite_statistics(conn)
        self._conn = conn
        return conn

    async def run(self, fn, *args):
        """``await fn(conn, *args)`` in one transaction; a lost connection is opened again once."""
        import psycopg

        async with self._lock:
            for attempt in (1, 2):
                try:
                    conn = await self._connect()
                except psycopg.OperationalError as exc:  # PostgreSQL down: 503, not a 500
                    raise Unavailable(f"crystallization: the database is unavailable ({exc})") from None
                try:
                    async with conn.transaction():
                        return await fn(conn, *args)
                except psycopg.OperationalError as exc:
                    if attempt == 2 or not conn.broken:
                        raise Unavailable(f"crystallization: the database is unavailable ({exc})") from None

    async def rewrite(self, table: str) -> None:
        """``VACUUM FULL``: a new table file without the dead row versions, whose bytes (a forgotten crystal's text)
        stay in the old one until its pages are reused. Best effort: the forget is done either way."""
        from psycopg import sql

        async with self._lock:
            try:
                conn = await self._connect()
                await conn.set_autocommit(True)
                try:
                    await conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
                finally:
                    await conn.set_autocommit(False)
            except Exception as exc:
                logging.getLogger("pps.crystals").warning("VACUUM FULL %s after a forget did not run: %s: %s",
                                                          table, type(exc).__name__, exc)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


# -- statements (each runs inside CrystalStore.run's transaction) ------------------------------------------------

async def _create(conn, content: str) -> int:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-crystals-number'))")
    row = await (await conn.execute(
        "INSERT INTO crystals (number, content) SELECT coalesce(max(number), 0) + 1, %s FROM crystals "
        "RETURNING number", (content,))).fetchone()
    return int(row[0])


async def _live(conn) -> list[tuple[int, str, Any, int]]:
    cur = await conn.execute(f"SELECT number, content, modified_at, version FROM crystals WHERE {LIVE} ORDER BY number")
    return [tuple(r) for r in await cur.fetchall()]


async def _newest(conn, n: int) -> list[tuple[int, str, Any, int]]:
    cur = await conn.execute(f"SELECT number, content, modified_at, version FROM crystals WHERE {LIVE} "
                             "ORDER BY number DESC LIMIT %s", (n,))
    return [tuple(r) for r in await cur.fetchall()]


async def _create_listing(conn, content: str) -> tuple[int, list[int]]:
    return await _create(conn, content), await _numbers(conn)  # one transaction: one commit


async def _delete_listing(conn) -> tuple[int, list[int]]:
    return await _delete_newest(conn), await _numbers(conn)


async def _numbers(conn) -> list[int]:
    return [r[0] for r in await (await conn.execute(f"SELECT number FROM crystals WHERE {LIVE} ORDER BY number")).fetchall()]


async def _delete_newest(conn) -> int:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-crystals-number'))")
    row = await (await conn.execute(
        f"UPDATE crystals SET state = 'deleted', modified_at = now(), version = version + 1 WHERE number = "
        f"(SELECT max(number) FROM crystals WHERE {LIVE}) RETURNING number")).fetchone()
    if row is None:
        raise NotFound("crystal_delete: there is no crystal to delete")
    return int(row[0])


async def _forget(conn, number: int) -> str:
    row = await (await conn.execute("SELECT state FROM crystals WHERE number = %s FOR UPDATE", (number,))).fetchone()
    if row is None or row[0] == "forgotten":
        raise NotFound(f"crystal_forget: no crystal named {crystal_name(number)!r} (crystal_list shows them)",
                       param="name")
    await conn.execute("UPDATE crystals SET content = '', state = 'forgotten', modified_at = now(), "
                       "version = version + 1 WHERE number = %s", (number,))
    return str(row[0])


BACKUP = "postgres/crystals.jsonl"


async def _all(conn) -> list[dict[str, Any]]:
    cur = await conn.execute("SELECT number, content, state, version, created_at, modified_at FROM crystals "
                             "ORDER BY number")
    return [{"number": n, "content": c, "state": s, "version": v, "created_at": t.isoformat(),
             "modified_at": m.isoformat()} for n, c, s, v, t, m in await cur.fetchall()]


async def _load(conn, rows: list[dict[str, Any]]) -> None:
    have = await _all(conn)
    if have:
        if [(r["number"], r["content"], r["state"]) for r in have] == [
                (r["number"], r["content"], r["state"]) for r in rows]:
            return  # restored onto the very table it was taken from
        raise Conflict("crystals: the PostgreSQL table of this entity already holds other crystals; restore with "
                       "another [crystals] schema (or into an empty one)")
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO crystals (number, content, state, version, created_at, modified_at) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [(r["number"], r["content"], r["state"], r["version"], r["created_at"], r["modified_at"]) for r in rows])


class PgCrystalLayer(Layer):
    """The crystallization layer on PostgreSQL: any number of processes share it (no owner lock)."""

    name = "crystallization"
    title = "Crystals"
    exclusive = False

    def __init__(self, memory) -> None:
        super().__init__()
        self.settings: CrystalSettings = memory.settings.plugin_settings(CrystalSettings, "crystals")
        self.store = open_store(self.settings, memory.settings)
        self.memory_settings = memory.settings
        self.home = Path(memory.home)
        self._tokens: dict[int, tuple[int, list[str]]] = {}  # number -> (version, tokens)

    def default_sections(self) -> list[SectionConfig]:
        return [SectionConfig(name="Crystals", layer=self.name, count=3, position=10)]

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        return Pointer(operation="get_crystals", params={"count": total})

    async def open(self) -> None:
        await self.store.run(_numbers)  # connects and migrates: a wrong dsn is the layer's open error

    async def close(self) -> None:
        await self.store.close()

    async def ready(self) -> str | None:
        """``/ready``: the crystals' database answers now (one ``SELECT 1`` on this layer's connection)."""
        try:
            await self.store.run(_ping)
        except Unavailable:
            return "the crystals' PostgreSQL is unreachable; try again shortly"
        return None

    def _split(self, numbers: list[int]) -> tuple[list[int], list[int]]:
        w = self.settings.window
        return numbers[-w:], numbers[:-w] if len(numbers) > w else []

    def _result(self, row, archived: bool, score: float = 1.0) -> SearchResult:
        number, content, modified, _v = row
        return SearchResult(layer=self.name, content=content, source=crystal_name(number), score=score,
                            timestamp=to_storage(modified), metadata={"kind": "document", "archived": archived})

    # -- operations ---------------------------------------------------------------------------------------

    async def crystallize(self, content: str) -> dict[str, Any]:
        number, numbers = await self.store.run(_create_listing, content)
        window, _arch = self._split(numbers)
        return {"created": crystal_name(number), "chars": len(content), "window": [crystal_name(n) for n in window]}

    async def listing(self) -> dict[str, Any]:
        window, archived = self._split(await self.store.run(_numbers))
        return {"current": [crystal_name(n) for n in window], "archived": [crystal_name(n) for n in archived],
                "window": self.settings.window}

    async def delete_newest_op(self) -> dict[str, Any]:
        number, numbers = await self.store.run(_delete_listing)
        window, _arch = self._split(numbers)
        return {"deleted": crystal_name(number), "current": [crystal_name(n) for n in window]}

    async def forget(self, name: str) -> dict[str, Any]:
        from .layer import NAME

        number = int(NAME.match(name).group(1))  # type: ignore[union-attr]  # the params model checked it
        before = await self.store.run(_forget, number)
        await self.store.rewrite("crystals")  # the emptied row's old version keeps the text until then
        window, _arch = self._split(await self.store.run(_numbers))
        self._tokens.pop(number, None)
        return {"forgotten": name, "from": [f"postgres ({'deleted' if before == 'deleted' else 'live'})"],
                "current": [crystal_name(n) for n in window]}

    # -- layer --------------------------------------------------------------------------------------------

    async def startup(self, count: int | None) -> StartupItems:
        """The newest ``count`` crystals (their total is not counted: a query more per startup)."""
        return StartupItems(items=await self.recent(count if count is not None else 1_000_000))

    async def recent(self, limit: int) -> list[SearchResult]:
        if limit <= 0:
            return []
        rows = await self.store.run(_newest, max(limit, self.settings.window))  # newest first
        window = {r[0] for r in rows[:self.settings.window]}
        return [self._result(r, r[0] not in window) for r in reversed(rows[:limit])]

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        rows = await self.store.run(_live)
        toks = []
        for number, content, _m, version in rows:
            hit = self._tokens.get(number)
            if hit is None or hit[0] != version:
                hit = (version, tokens(content))
                self._tokens[number] = hit
            toks.append(hit[1])
        window = {r[0] for r in rows[-self.settings.window:]}
        scored = lexical_scores_tokens(query, toks)
        ranked = sorted(((s, r) for r, s in zip(rows, scored, strict=True) if s > 0), key=lambda t: (-t[0], t[1][0]))
        return [self._result(r, r[0] not in window, s) for s, r in ranked[offset: offset + limit]]

    async def snapshot(self, dest: Path) -> list[str] | None:
        """``pps backup``: every row (deleted and forgotten ones too, so numbers stay used) as JSON lines."""
        rows = await self.store.run(_all)
        path = dest / BACKUP
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        os.chmod(path, 0o600)
        return [BACKUP]

    async def check_restore(self, manifest: dict[str, Any]) -> None:
        """A restore told ``PPS_POSTGRES_DSN``/``_SCHEMA`` puts the crystals there too, or refuses."""
        self.memory_settings.follows("crystals", {"dsn": self.settings.dsn, "schema": self.settings.schema_name},
                                     "postgres")

    async def after_restore(self, manifest: dict[str, Any]) -> None:
        """``pps restore``: the archive's rows go into this entity's (empty) table, then their file is removed
        from the home (the table is the crystals)."""
        path = self.home / BACKUP
        if not path.is_file():
            return
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        await self.store.run(_load, rows)
        path.unlink()
        if not any(path.parent.iterdir()):
            path.parent.rmdir()

    async def health(self) -> LayerHealth:
        try:
            numbers = await self.store.run(_numbers)
        except Exception as exc:
            return LayerHealth(layer=self.name, available=False, detail=f"{type(exc).__name__}: {exc}")
        window, archived = self._split(numbers)
        return LayerHealth(layer=self.name, available=True, detail=f"postgres schema {self.store.schema}",
                           counts={"crystals": len(window), "archived": len(archived)},
                           latency_ms=self.recent_latency_ms)

"""Test fixtures: a real PostgreSQL (with pgvector) from the ``pgserver`` package, in a temp dir, per session.

``pg_dsn`` is the server's URI; ``postgres_section`` gives each test its own schema (dropped after), so tests
never see each other's rows. Import them into a conftest: ``from pps_postgres.testing import *``.
"""

from __future__ import annotations

import uuid
import warnings

import pytest

__all__ = ["StoppablePostgres", "analyze_schema", "audit", "pg_dsn", "postgres_section", "start_postgres",
           "statistics_files_holding", "statistics_holding"]


def start_postgres():
    """A PostgreSQL server of its own (pgserver: unix socket in a temp dir); returns (dsn, stop_and_delete).

    The data dir is not under pytest's tmp_path: as root, pgserver runs the server as an unprivileged user,
    which cannot enter pytest's private (0700) base directory.
    """
    import tempfile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about a missing XDG_RUNTIME_DIR
        import pgserver

        server = pgserver.get_server(tempfile.mkdtemp(prefix="pps-pgdata-"), cleanup_mode="delete")

    def stop() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()

    return server.get_uri(), stop


class StoppablePostgres:
    """A PostgreSQL server of a test's own that the test stops and starts again (the store going down mid-run);
    its data stay between the two. ``with StoppablePostgres() as pg: pg.dsn, pg.stop(), pg.start()``."""

    def __init__(self) -> None:
        import tempfile

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            self.server = pgserver.get_server(tempfile.mkdtemp(prefix="pps-pgdata-"), cleanup_mode="delete")
        self.dsn = self.server.get_uri()

    def stop(self) -> None:
        """A fast shutdown (SIGINT to the postmaster): sessions are cut, nothing is lost."""
        import os
        import signal
        import time

        pid = self.server.get_pid()
        assert pid is not None
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        raise AssertionError("PostgreSQL did not stop")

    def start(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.ensure_postgres_running()
        assert self.server.get_uri() == self.dsn

    def __enter__(self) -> StoppablePostgres:
        return self

    def __exit__(self, *exc) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.cleanup()


@pytest.fixture(scope="session")
def pg_dsn():
    """The session's PostgreSQL server; the first store to open creates the vector extension, as in production."""
    dsn, stop = start_postgres()
    try:
        yield dsn
    finally:
        stop()


@pytest.fixture
def postgres_section(pg_dsn):
    """``section(entity)``: a ``[postgres]`` settings table with a schema of this test's own per entity."""
    import psycopg

    test = uuid.uuid4().hex[:10]
    made: list[str] = []

    def section(entity: str = "testentity") -> dict:
        schema = f"t{test}_{''.join(c if c.isalnum() else '_' for c in entity.lower())}"[:63]
        if schema not in made:
            made.append(schema)
        return {"dsn": pg_dsn, "schema": schema, "pool_min": 1, "pool_max": 4}

    yield section
    if made:
        import time

        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for schema in made:
                # a memory still closing (a test's make_memory is torn down after this) may be changing the same
                # catalog rows, e.g. an index made in the background: "tuple concurrently updated", tried again
                for attempt in range(20):
                    try:
                        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                        break
                    except (psycopg.errors.InternalError, psycopg.errors.LockNotAvailable,
                            psycopg.errors.DeadlockDetected):
                        if attempt == 19:
                            raise
                        time.sleep(0.1)


def audit(dsn: str, schema: str, tally) -> dict:
    """``pps_sqlite.testing.audit`` for a PostgreSQL-backed entity: reads the schema's tables directly."""
    import psycopg
    from pps_turns.loadgen import audit_rows

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f'SELECT id, message_id, summary_id FROM "{schema}".messages').fetchall()
        summaries = conn.execute(f'SELECT id, start_id, end_id, message_count FROM "{schema}".message_summaries '
                                 "ORDER BY start_id").fetchall()
    return audit_rows(rows, summaries, tally)


def analyze_schema(dsn: str, schema: str) -> list[str]:
    """``ANALYZE`` every table of the schema, as autovacuum does to any table with enough changed rows; the tables."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1",
                                             (schema,))]
        for table in tables:
            conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(table)))
    return tables


def statistics_holding(dsn: str, schema: str, words: list[str]) -> list[str]:
    """Where PostgreSQL's planner statistics of the schema (``pg_stats``: every table's and index's columns, every
    field, arrays as text) hold any of ``words``, or the lexeme the English text search made of one (a tsvector
    column's ``most_common_elems`` keeps lexemes: "zqcanary" is "zqcanari" there): ``table.column.field`` each.
    ANALYZE copies sampled values there verbatim, and a DELETE or VACUUM FULL of the rows leaves them."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        needles = set(words)
        for word in (w for w in words if w.isalnum()):  # one word: its lexeme too
            needles.update(r[0] for r in conn.execute(
                "SELECT lexeme FROM unnest(to_tsvector('english'::regconfig, %s))", (word,)))
        fields = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'pg_catalog' "
            "AND table_name = 'pg_stats' AND column_name NOT IN ('schemaname', 'tablename', 'attname') "
            "ORDER BY ordinal_position")]
        rows = conn.execute("SELECT tablename, attname, " + ", ".join(f"{f}::text" for f in fields)
                            + " FROM pg_stats WHERE schemaname = %s", (schema,)).fetchall()
    return sorted(f"{r[0]}.{r[1]}.{field}" for r in rows for field, value in zip(fields, r[2:], strict=True)
                  if value is not None and any(n.lower() in value.lower() for n in needles))


def statistics_files_holding(dsn: str, word: str) -> list[str]:
    """``pg_statistic``'s own files (its table, TOAST table and their indexes) holding ``word`` after a checkpoint:
    rows a DELETE of statistics left dead keep their bytes there until the catalog is rewritten."""
    from pathlib import Path

    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        datadir = Path(conn.execute("SHOW data_directory").fetchone()[0])
        paths = [r[0] for r in conn.execute(
            "SELECT pg_relation_filepath(oid) FROM pg_class WHERE oid IN ('pg_statistic'::regclass, "
            "(SELECT reltoastrelid FROM pg_class WHERE oid = 'pg_statistic'::regclass)) OR oid IN "
            "(SELECT indexrelid FROM pg_index WHERE indrelid IN ('pg_statistic'::regclass, "
            "(SELECT reltoastrelid FROM pg_class WHERE oid = 'pg_statistic'::regclass)))")]
    return sorted(str(p.relative_to(datadir)) for path in paths for p in datadir.glob(path + "*")
                  if word.encode() in p.read_bytes())

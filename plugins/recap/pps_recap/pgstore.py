"""The recap in PostgreSQL (``[recap] store = "postgres"``): one row of the entity's schema, so every server of a
multi-server entity shows the same last-session recap at startup and none keeps it in its home.

The row is a copy of turns (a narrative of a session): it is declared through the forget lineage
(:func:`pps_recap.plugin.pps_turn_copies`) and forgetting deletes it, as it deletes ``_recap.md``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pps_core.errors import ConfigError, Unavailable

TABLE = "recaps"
MIGRATIONS = [
    f"""
    CREATE TABLE {TABLE} (
        slot text PRIMARY KEY CHECK (slot = 'last'),
        text text NOT NULL,
        meta jsonb NOT NULL,
        saved_at timestamptz NOT NULL DEFAULT now()
    );
    """,
    # 2: how far each session log reached when turns were forgotten (paths and byte sizes, never content), shared by
    # every server: one row per forget, merged when read.
    """
    CREATE TABLE recap_forget_marks (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at double precision NOT NULL,
        logs jsonb NOT NULL
    );
    """,
    # 3: what the session logs held when turns were forgotten, a digest per entry (issue 35: not by path and size)
    """
    CREATE TABLE recap_forgotten_entries (digest text PRIMARY KEY);
    """,
    # 4: no planner statistics of the recap's text (the table has one row, which ANALYZE never lists as a common
    # value or a histogram bound; kept so whatever the table holds later)
    f"""
    ALTER TABLE {TABLE} ALTER COLUMN text SET STATISTICS 0, ALTER COLUMN meta SET STATISTICS 0;
    """,
]


def target(rs, entity_settings) -> tuple[str, str]:
    """``(dsn, schema)``: ``[recap] dsn``/``schema``, each defaulting to ``[postgres]``'s, the schema named as every
    layer in PostgreSQL names it (``EntitySettings.database_place``)."""
    return entity_settings.database_place("recap", rs.dsn, rs.schema_name, "postgres")


_CONNS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


@contextmanager
def _connection(dsn: str, schema: str) -> Iterator[Any]:
    """This process's connection to the entity's schema (made once, the table migrated then), one call at a time;
    a broken one is made again. Commits when the block ends, rolls back when it raises."""
    with _LOCK:
        conn = _CONNS.get((dsn, schema))
        if conn is None or conn.closed or conn.broken:
            conn = _CONNS[(dsn, schema)] = _connect(dsn, schema)
        try:
            yield conn
            conn.commit()
        except BaseException:
            if not conn.closed:
                conn.rollback()
            raise


def _connect(dsn: str, schema: str):
    """A connection with the table made (under an advisory lock) and ``search_path`` set."""
    import psycopg
    from psycopg import sql

    try:
        conn = psycopg.connect(dsn, connect_timeout=10, autocommit=False)
    except psycopg.OperationalError as exc:
        raise Unavailable(f"session recap: the database is unavailable ({exc})") from None
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-recap-migrate'))")
        # shared by every plugin's migration, taken last: one CREATE SCHEMA at a time (pps_postgres.schema)
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-create-schema'))")
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("CREATE TABLE IF NOT EXISTS recap_schema_version (version integer NOT NULL)")
        current = conn.execute("SELECT max(version) FROM recap_schema_version").fetchone()[0] or 0
        if current > len(MIGRATIONS):
            conn.close()
            raise ConfigError(f"recap table v{current} is newer than this PPS (v{len(MIGRATIONS)}): upgrade PPS")
        for version in range(current + 1, len(MIGRATIONS) + 1):
            conn.execute(MIGRATIONS[version - 1])
            conn.execute("INSERT INTO recap_schema_version (version) VALUES (%s)", (version,))
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    conn.commit()
    return conn


def ping(dsn: str, schema: str) -> None:
    """``SELECT 1`` on this process's connection (``/ready``); :class:`Unavailable` when the database is not there."""
    import psycopg

    try:
        with _connection(dsn, schema) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:  # the connection was cut: made again at the next call
        raise Unavailable(f"session recap: the database is unavailable ({exc})") from None


def load(dsn: str, schema: str) -> tuple[str, dict[str, Any]] | None:
    with _connection(dsn, schema) as conn:
        row = conn.execute(f"SELECT text, meta FROM {TABLE} WHERE slot = 'last'").fetchone()
    if row is None or not row[0].strip():
        return None
    meta = row[1] if isinstance(row[1], dict) else json.loads(row[1])
    return row[0].strip(), meta


def _lock(conn) -> None:
    """Saving a recap and forgetting exclude each other across every server of the entity (this transaction)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-recap:' || current_schema()))")


def _marks(conn) -> dict[str, Any]:
    at, logs = 0.0, {}
    for when, reached in conn.execute("SELECT at, logs FROM recap_forget_marks ORDER BY id").fetchall():
        at = max(at, float(when))
        for name, size in (reached if isinstance(reached, dict) else json.loads(reached)).items():
            if isinstance(size, int):
                logs[name] = max(logs.get(name, 0), size)
    entries = {r[0] for r in conn.execute("SELECT digest FROM recap_forgotten_entries").fetchall()}
    return {"at": at, "logs": logs, "entries": entries} if at else {}


def marks(dsn: str, schema: str) -> dict[str, Any]:
    """``{"at", "logs", "entries"}`` merged over every forget (as ``_recap_forgotten.json`` holds them), or {} when
    none."""
    with _connection(dsn, schema) as conn:
        return _marks(conn)


def forget_record(dsn: str, schema: str) -> dict[str, Any]:
    """What :func:`forget` recorded, row by row (``pps backup``): ``{"marks": [[at, logs]], "entries": [digest]}``."""
    with _connection(dsn, schema) as conn:
        marks = [[float(at), logs if isinstance(logs, dict) else json.loads(logs)]
                 for at, logs in conn.execute("SELECT at, logs FROM recap_forget_marks ORDER BY id").fetchall()]
        entries = [r[0] for r in conn.execute("SELECT digest FROM recap_forgotten_entries ORDER BY digest")]
    return {"marks": marks, "entries": entries}


def keep_forget_record(dsn: str, schema: str, record: dict[str, Any]) -> None:
    """Put back what :func:`forget_record` read (``pps restore``), in one transaction."""
    marks, entries = record.get("marks") or [], record.get("entries") or []
    with _connection(dsn, schema) as conn:
        _lock(conn)
        for at, logs in marks:
            conn.execute("INSERT INTO recap_forget_marks (at, logs) VALUES (%s, %s::jsonb)",
                         (float(at), json.dumps(logs if isinstance(logs, dict) else {})))
        if entries:
            conn.execute("INSERT INTO recap_forgotten_entries (digest) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING",
                         ([str(e) for e in entries],))


def forget(dsn: str, schema: str, at: float, logs: dict[str, int], entries: Sequence[str] = ()) -> int:
    """Record the forget (its time, the digests of the log entries it covered) and delete the recap, in one
    transaction (then rewrite the table, as :func:`remove`); how many recaps went."""
    with _connection(dsn, schema) as conn:
        _lock(conn)
        conn.execute("INSERT INTO recap_forget_marks (at, logs) VALUES (%s, %s::jsonb)", (at, json.dumps(logs)))
        if entries:
            conn.execute("INSERT INTO recap_forgotten_entries (digest) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING",
                         (list(entries),))
    return remove(dsn, schema)


def save_unless(dsn: str, schema: str, text: str, meta: dict[str, Any], refuse) -> bool:
    """Save the recap unless ``refuse(marks)`` says a forget since made it stale, under the lock :func:`forget`
    takes; whether it was saved."""
    with _connection(dsn, schema) as conn:
        _lock(conn)
        if refuse(_marks(conn)):
            return False
        conn.execute(f"INSERT INTO {TABLE} (slot, text, meta) VALUES ('last', %s, %s::jsonb) ON CONFLICT (slot) "
                     "DO UPDATE SET text = excluded.text, meta = excluded.meta, saved_at = now()",
                     (text, json.dumps(meta, default=str)))
    return True


def save(dsn: str, schema: str, text: str, meta: dict[str, Any]) -> None:
    with _connection(dsn, schema) as conn:
        conn.execute(f"INSERT INTO {TABLE} (slot, text, meta) VALUES ('last', %s, %s::jsonb) ON CONFLICT (slot) "
                     "DO UPDATE SET text = excluded.text, meta = excluded.meta, saved_at = now()",
                     (text, json.dumps(meta, default=str)))


def remove(dsn: str, schema: str) -> int:
    """Delete the recap, then rewrite the table (``VACUUM FULL``, as pps-postgres does for forgotten turns): a
    deleted row's bytes stay in the table's file until then."""
    with _connection(dsn, schema) as conn:
        removed = conn.execute(f"DELETE FROM {TABLE}").rowcount
        conn.commit()
        conn.autocommit = True
        try:
            conn.execute(f"VACUUM FULL {TABLE}")
        finally:
            conn.autocommit = False
    return removed

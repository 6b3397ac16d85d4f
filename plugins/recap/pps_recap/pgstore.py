"""The recap in PostgreSQL (``[recap] store = "postgres"``): one row of the entity's schema, so every server of a
multi-server entity shows the same last-session recap at startup and none keeps it in its home.

The row is a copy of turns (a narrative of a session): it is declared through the forget lineage
(:func:`pps_recap.plugin.pps_turn_copies`) and forgetting deletes it, as it deletes ``_recap.md``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
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
]


def target(rs, entity_settings) -> tuple[str, str]:
    """``(dsn, schema)``: ``[recap] dsn``/``schema``, each defaulting to ``[postgres]``'s, the schema to
    ``pps_<entity>`` folded as pps-postgres folds it."""
    postgres = entity_settings.section("postgres")
    dsn = rs.dsn or str(postgres.get("dsn") or "")
    if not dsn:
        raise ConfigError('recap.dsn: store = "postgres" needs a dsn (or a [postgres] dsn), e.g. '
                          '"postgresql://pps@db/pps"')
    name = rs.schema_name or str(postgres.get("schema") or "")
    if not name:
        entity = entity_settings.entity
        folded = re.sub(r"[^a-z0-9_]", "_", entity.lower())
        name = "pps_" + folded + ("" if folded == entity else "_" + hashlib.sha1(entity.encode()).hexdigest()[:8])
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name):
        raise ConfigError(f"recap.schema: {name!r} is not a plain identifier (letters, digits, _)")
    return dsn, name


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


def load(dsn: str, schema: str) -> tuple[str, dict[str, Any]] | None:
    with _connection(dsn, schema) as conn:
        row = conn.execute(f"SELECT text, meta FROM {TABLE} WHERE slot = 'last'").fetchone()
    if row is None or not row[0].strip():
        return None
    meta = row[1] if isinstance(row[1], dict) else json.loads(row[1])
    return row[0].strip(), meta


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

"""``pps backup`` / ``pps restore`` of the turn tables: each table's rows in PostgreSQL's own COPY text format.

Export: one ``REPEATABLE READ`` transaction (every table from the same snapshot), ``COPY (SELECT ...) TO STDOUT``
per table, streamed to ``postgres/turns/<table>.copy`` in the archive, with ``manifest.json`` naming the schema
version, each table's columns and its row count, and the counts the turn layers report, taken in that snapshot
(the backup's manifest records them: a fleet's other servers write meanwhile). Generated columns (the ``tsvector``) are left out: PostgreSQL
computes them again. COPY's text format round-trips every value exactly (timestamps with their zone, pgvector
values, text with any byte a turn may hold) and is what ``pg_dump`` writes for data, without needing its binary.

Import (into the entity's schema, which must hold no turns): one transaction that keeps capture out (the capture
advisory lock, exclusive), ``COPY ... FROM STDIN`` per table in foreign-key order, the identity sequences moved
past the restored ids, then every table counted against the manifest. Any failure rolls all of it back: the
schema is as it was. The archive is hostile input: tables come from a fixed list, columns must be ones the
table has, and the rows are parsed by PostgreSQL into typed columns (constraints hold).

Every table of the schema is in the archive but these, each on purpose: ``pps_schema_version`` (the restoring PPS
migrates its own schema first), ``vector_backlog`` (derived: a load puts every turn without a vector in it again) and
``shared_values`` (what a fleet's servers agree on: the digest of the entity's token; a restored entity has the
token the restore wrote, or the archive's with ``--include-token``). ``forget_tokens`` (``forget_search``
confirmations, ten minutes) are in it: one taken before the backup still works after a quick restore.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from psycopg import sql

from pps_core.errors import Conflict, InvalidParams

FOLDER = "postgres/turns"
MANIFEST = "manifest.json"
#: Tables in the order a restore loads them (a row's foreign keys point at tables earlier in the list).
TABLES: tuple[tuple[str, str], ...] = (
    ("message_summaries", "id"), ("messages", "id"), ("read_cursors", "consumer_key"),
    ("message_vectors", "message_id"), ("summary_vectors", "summary_id"), ("forget_log", "id"),
    ("forgotten_message_ids", "digest"), ("owed_forgets", "id"), ("forget_tokens", "digest"))
#: Tables with an identity column whose sequence must continue after the restored ids.
IDENTITY = ("message_summaries", "messages", "forget_log", "owed_forgets")
#: A schema holding a row in any of these holds an entity's turns: a restore is refused.
OCCUPIED = ("messages", "message_summaries", "forget_log", "forgotten_message_ids", "read_cursors")
CHUNK = 1 << 20


async def _columns(conn, schema: str, table: str) -> list[str]:
    rows = await (await conn.execute(
        "SELECT column_name AS c FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
        "AND is_generated = 'NEVER' ORDER BY ordinal_position", (schema, table))).fetchall()
    return [r["c"] for r in rows]


async def export(conn, schema: str, version: int, dest: Path) -> list[str]:
    """Write every turn table under ``dest / FOLDER`` from one snapshot; the home-relative folder written."""
    folder = dest / FOLDER
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    manifest: dict[str, Any] = {"format": 1, "schema_version": version, "tables": {}}
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        for table, key in TABLES:
            columns = await _columns(conn, schema, table)
            query = sql.SQL("COPY (SELECT {} FROM {} ORDER BY {}) TO STDOUT").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(table), sql.Identifier(key))
            path = folder / f"{table}.copy"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            rows = 0
            with os.fdopen(fd, "wb") as out:
                async with conn.cursor() as cur, cur.copy(query) as copy:
                    async for data in copy:
                        out.write(data)
                        rows += bytes(data).count(b"\n")  # one line per row: newlines inside values are escaped
            manifest["tables"][table] = {"columns": columns, "rows": rows}
        # the counts the layers report, from the same snapshot as the rows (other servers write meanwhile)
        manifest["counts"] = dict(await (await conn.execute(
            "SELECT count(*) AS total, count(*) FILTER (WHERE summary_id IS NULL) AS unsummarized, "
            "count(*) FILTER (WHERE ingested_at IS NULL) AS uningested, "
            "(SELECT count(*) FROM read_cursors) AS cursors, "
            "(SELECT count(*) FROM message_summaries) AS summaries, "
            "(SELECT count(*) FROM message_summaries WHERE rewrite IS NOT NULL) AS needs_rewrite "
            "FROM messages")).fetchone())
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    os.chmod(path, 0o600)
    return [FOLDER]


def exported_counts(dest: Path) -> dict[str, int] | None:
    """The counts :func:`export` took in its snapshot (``total``, ``unsummarized``, ``uningested``, ``cursors``,
    ``summaries``, ``needs_rewrite``), read back from ``dest``; None when nothing was exported there."""
    path = dest / FOLDER / MANIFEST
    if not path.is_file():
        return None
    counts = json.loads(path.read_text(encoding="utf-8")).get("counts")
    return {k: int(v) for k, v in counts.items()} if isinstance(counts, dict) else None


def _refuse(why: str) -> InvalidParams:
    return InvalidParams(f"the archive's turn rows cannot be loaded ({why}); nothing was restored", param="file")


def read_manifest(home: Path) -> dict[str, Any] | None:
    path = home / FOLDER / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise _refuse(f"{FOLDER}/{MANIFEST} is not JSON") from None
    tables = manifest.get("tables") if isinstance(manifest, dict) else None
    if not isinstance(tables, dict) or not isinstance(manifest.get("schema_version"), int):
        raise _refuse(f"{FOLDER}/{MANIFEST} names no tables")
    return manifest


async def load(conn, schema: str, version: int, lock_key: str, home: Path, manifest: dict[str, Any]) -> dict[str, int]:
    """Load the archive's rows into the (empty) schema in one transaction; rows per table."""
    import psycopg

    if manifest["schema_version"] > version:
        raise _refuse(f"written by a newer PPS: turn schema v{manifest['schema_version']}, this one has v{version}")
    folder = home / FOLDER
    loaded: dict[str, int] = {}
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock_key,))  # no capture meanwhile
            for table in OCCUPIED:
                held = await (await conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {}) AS x")
                                                 .format(sql.Identifier(table)))).fetchone()
                if held["x"]:
                    raise Conflict(f"raw_capture: the PostgreSQL schema {schema} already holds turns ({table} has rows); "
                                   "restore into an empty schema (another [postgres] schema, or a new entity name "
                                   "without one)", param="file")
            for table, _key in TABLES:
                entry = manifest["tables"].get(table)
                if entry is None:
                    continue
                have = set(await _columns(conn, schema, table))
                columns = entry.get("columns")
                if not isinstance(columns, list) or not columns or not all(isinstance(c, str) and c in have
                                                                           for c in columns):
                    raise _refuse(f"{table}: its columns are not those of this PPS's table")
                path = folder / f"{table}.copy"
                if not path.is_file() or path.is_symlink():
                    raise _refuse(f"{FOLDER}/{table}.copy is missing")
                query = sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(table),
                                                                  sql.SQL(", ").join(map(sql.Identifier, columns)))
                async with conn.cursor() as cur, cur.copy(query) as copy:
                    with open(path, "rb") as src:
                        while chunk := src.read(CHUNK):
                            await copy.write(chunk)
                n = (await (await conn.execute(sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table))))
                     .fetchone())["n"]
                if n != entry.get("rows"):
                    raise _refuse(f"{table}: {n} rows loaded, the archive counted {entry.get('rows')}")
                loaded[table] = n
            for table in IDENTITY:
                await conn.execute(sql.SQL(
                    "SELECT setval(pg_get_serial_sequence(%s, 'id'), COALESCE((SELECT max(id) FROM {}), 1), "
                    "(SELECT max(id) FROM {}) IS NOT NULL)").format(sql.Identifier(table), sql.Identifier(table)),
                    (sql.Identifier(schema, table).as_string(conn),))
            await conn.execute("INSERT INTO vector_backlog (message_id) SELECT id FROM messages m WHERE NOT EXISTS "
                               "(SELECT 1 FROM message_vectors v WHERE v.message_id = m.id) ON CONFLICT DO NOTHING")
    except psycopg.Error as exc:  # a damaged row, a broken constraint: the transaction rolled back
        raise _refuse(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    return loaded


def remove(home: Path) -> None:
    """The rows are in the database now: their files leave the home."""
    folder = home / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    parent = folder.parent
    if parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()

"""``pps db upgrade --entity NAME``: the entity's PostgreSQL schema brought to this PPS's version, as a step of its
own (servers do not upgrade a schema they find older than their code unless ``[postgres] auto_upgrade``).

Safe while servers run: migrations are serialised by an advisory lock and each upgrade is one transaction (all of
it or none); ``--lock-timeout`` bounds how long it may wait for a table lock, so it never queues the fleet's
writes behind it for long (it fails and can be run again). Idempotent: a schema already up to date is left alone.
Exit codes: 0 done (or nothing to do), 1 it failed (the database unreachable, a lock not granted), 2 bad usage
(no such entity, nothing of it in PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

#: How many times a migration that could not get its table locks in time is tried again.
LOCK_TRIES = 3


async def upgrade(dsn: str, schema: str, entity: str, lock_timeout_s: float, connect_timeout_s: float) -> tuple[int, int]:
    """(version before, after) of the entity's schema, upgraded."""
    import psycopg
    from psycopg.rows import dict_row

    from .schema import NO_STATISTICS_VERSION, migrate, rewrite_statistics

    for attempt in range(1, LOCK_TRIES + 1):
        async with await psycopg.AsyncConnection.connect(dsn, connect_timeout=max(1, int(connect_timeout_s)),
                                                         row_factory=dict_row) as conn:
            try:
                before, after = await migrate(conn, schema, upgrade=True, entity=entity,
                                              lock_timeout_s=lock_timeout_s)
            except psycopg.errors.LockNotAvailable:
                if attempt == LOCK_TRIES:
                    raise
                await asyncio.sleep(attempt)
                continue
            if 0 < before < NO_STATISTICS_VERSION <= after:  # statistics that held turn text were removed
                await conn.set_autocommit(True)
                await conn.execute("SELECT set_config('lock_timeout', %s, false)",
                                   (f"{int(lock_timeout_s * 1000)}ms",))
                why = await rewrite_statistics(conn)
                if why:
                    print(f"pps db upgrade: {schema}: {why}", file=sys.stderr)
            return before, after
    raise AssertionError("unreachable")


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    import psycopg

    from pps_core.errors import PPSError
    from pps_core.settings import load_settings

    from .settings import PostgresSettings, schema_for

    try:
        settings = load_settings(args.entity, args.home, must_exist=True)
        if "postgres" not in settings.plugins:
            print(f"pps db upgrade: entity {settings.entity!r} keeps its turns in no PostgreSQL database (the "
                  "postgres plugin is not in its plugins): nothing to upgrade", file=sys.stderr)
            return 2
        ps = settings.plugin_settings(PostgresSettings, "postgres")
        if not ps.dsn:
            print("pps db upgrade: postgres.dsn is not set (a libpq URI, e.g. postgresql://pps@db.example/pps)",
                  file=sys.stderr)
            return 2
        schema = schema_for(ps, settings.entity)
    except PPSError as exc:
        print(f"pps db upgrade: {exc}", file=sys.stderr)
        return 2
    try:
        before, after = asyncio.run(upgrade(ps.dsn, schema, settings.entity, args.lock_timeout, ps.connect_timeout_s))
    except (psycopg.Error, PPSError, RuntimeError) as exc:
        print(f"pps db upgrade: {schema}: {type(exc).__name__}: {str(exc).strip()}", file=sys.stderr)
        return 1
    if before == after:
        print(f"{schema}: v{after}, up to date")
    else:
        print(f"{schema}: v{before} -> v{after}" if before else f"{schema}: created at v{after}")
    return 0


def register(cli) -> None:
    db = cli.group("db", help="the entity's database: pps db upgrade (PostgreSQL schema migrations)", metavar="STEP")
    p = db.add("upgrade", cmd_db_upgrade, help="bring the entity's PostgreSQL schema to this PPS's version (safe "
                                                "while servers run; idempotent)")
    cli.entity_args(p)
    p.add_argument("--lock-timeout", type=float, default=10.0, metavar="S",
                   help=f"give up on a table lock not granted within S seconds (tried {LOCK_TRIES} times; default 10)")

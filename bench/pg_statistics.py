"""No planner statistics of turn text (pps_postgres schema v7): what the upgrade costs, and the plans with and without.

    .venv/bin/python bench/pg_statistics.py [--turns 200000]

On a PostgreSQL server pgserver starts in a temp dir, an entity schema gets that many turns (plain SQL: four
topics, seven authors, five channels, text of ~250 bytes), is put back to v6 (every text column's statistics
target back to the default) and ANALYZEd, as autovacuum leaves a schema in use. Prints:

- the seconds ``pps db upgrade`` takes to v7 (the ``tsv`` columns dropped and made again with their GIN indexes,
  the other columns' statistics dropped, ``pg_statistic`` rewritten), beside a ``VACUUM FULL messages`` in the
  same run (what every forget already costs) as a ratio;
- for the store's searches (BM25 candidates and document frequencies, a channel's BM25, unsummarized turns of a
  channel, a time range, channel neighbours): whether the scans of each plan are the same with the text
  columns' statistics as without them, and each query's median time of 7 runs both ways (same run, warm cache).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import warnings

QUERIES = {
    "bm25 candidates": ("SCORE", ""),
    "bm25 of a channel": ("SCORE", "AND d.channel = %(channel)s"),
    "document frequencies": ("LEXEMES", ""),
    "unsummarized of a channel": ("SELECT id FROM messages WHERE summary_id IS NULL AND channel = %(channel)s "
                                  "ORDER BY created_at, id LIMIT 50", ""),
    "time range of a channel": ("SELECT id FROM messages WHERE created_at >= now() - interval '3 days' AND "
                                "created_at < now() AND (channel = %(channel)s OR left(channel, 3) = 'c1:') "
                                "ORDER BY created_at, id", ""),
    "channel neighbours": ("SELECT m.id AS a, p.id AS b FROM messages m JOIN messages p ON p.channel = m.channel "
                           "AND p.id BETWEEN m.id - 3 AND m.id + 3 AND p.id <> m.id WHERE m.id = ANY(%(ids)s)", ""),
}
PARAMS = {"lexemes": ["kettl", "word17"], "idf": [1.0, 5.0], "cand": ["word17"], "n": 10, "k1": 1.2, "k1plus": 2.2,
          "b": 0.75, "avgdl": 5.0, "channel": "c1", "text": "kettles word17", "ids": [5, 500, 5000]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200_000)
    args = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(tempfile.mkdtemp(prefix="pps-pgdata-"), cleanup_mode="delete")
    try:
        run(server.get_uri(), args.turns)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()


def run(dsn: str, turns: int) -> None:
    import psycopg
    from pps_postgres.schema import NO_STATISTICS, migrate
    from pps_postgres.textsearch import _LEXEMES, _SCORE
    from pps_postgres.upgrade import upgrade
    from psycopg import ClientCursor, sql

    async def create() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await migrate(conn, "bench")

    asyncio.run(create())
    conn = psycopg.connect(dsn, autocommit=True, cursor_factory=ClientCursor)
    conn.execute("SET search_path TO bench, public")
    conn.execute(
        "INSERT INTO messages (content, author_name, channel, created_at) SELECT 'turn ' || i || ' about ' || "
        "(ARRAY['gardens', 'kettles', 'tides', 'lanterns'])[1 + i %% 4] || ' and word' || i || ' ' || "
        "repeat(md5(i::text) || ' ', 6), 'A' || i %% 7, 'c' || i %% 5, now() - i * interval '1 minute' "
        "FROM generate_series(1, %s) i", (turns,))

    def targets(value: int) -> None:
        for table, columns in NO_STATISTICS.items():
            conn.execute(f"ALTER TABLE {table} " + ", ".join(f"ALTER COLUMN {c} SET STATISTICS {value}"
                                                            for c in columns))

    targets(-1)
    conn.execute("DELETE FROM pps_schema_version WHERE version = 7")
    conn.execute("ANALYZE")
    size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('messages'))").fetchone()[0]

    def scans() -> tuple[dict[str, list[str]], dict[str, float]]:
        out, took = {}, {}
        for name, (query, channel) in QUERIES.items():
            if query in ("SCORE", "LEXEMES"):
                query = sql.SQL(_SCORE if query == "SCORE" else _LEXEMES).format(
                    table=sql.Identifier("messages"), channel=sql.SQL(channel)).as_string(None)
            plan = [r[0] for r in conn.execute("EXPLAIN " + query, PARAMS)]
            out[name] = sorted(line.split("  (cost")[0].strip(" ->") for line in plan if " Scan " in line)
            times = []
            for _ in range(7):
                began = time.perf_counter()
                conn.execute(query, PARAMS).fetchall()
                times.append(time.perf_counter() - began)
            took[name] = sorted(times)[3]
        return out, took

    with_statistics, with_took = scans()
    began = time.monotonic()
    before, after = asyncio.run(upgrade(dsn, "bench", "bench", 60, 10))
    upgraded = time.monotonic() - began
    conn.execute("ANALYZE")
    without, without_took = scans()
    began = time.monotonic()
    conn.execute("VACUUM FULL messages")
    vacuumed = time.monotonic() - began
    print(f"turns {turns:,} (messages {size}), schema v{before} -> v{after}")
    print(f"pps db upgrade to v7: {upgraded:.1f} s; VACUUM FULL messages (every forget's rewrite): {vacuumed:.1f} s; "
          f"ratio {upgraded / vacuumed:.2f}")
    for name in QUERIES:
        same = "same" if with_statistics[name] == without[name] else "other"
        print(f"  {name}: {same} scans, median of 7 {without_took[name] * 1000:.2f} ms without the statistics, "
              f"{with_took[name] * 1000:.2f} ms with (ratio {without_took[name] / with_took[name]:.2f}): "
              f"{', '.join(without[name])}"
              + ("" if same == "same" else f" (with statistics: {', '.join(with_statistics[name])})"))


if __name__ == "__main__":
    main()

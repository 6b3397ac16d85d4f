"""PostgreSQL's planner statistics keep no text of a turn.

``ANALYZE`` (autovacuum's, on any table with enough changed rows; ours after a restore) copies sampled values into
``pg_statistic`` (``pg_stats``): a text column's most common values and histogram bounds verbatim, a tsvector's
most common lexemes. A DELETE or ``VACUUM FULL`` of the rows leaves them there, so a forgotten turn's words stayed
in the catalog. Every column that holds text a client wrote (or vectors made of it) has no statistics
(``SET STATISTICS 0``): ANALYZE skips it.
"""

import secrets
from pathlib import Path

import psycopg
from pps_postgres.testing import analyze_schema, statistics_files_holding, statistics_holding

PLUGINS = ["postgres"]


def files_holding(dsn: str, word: str) -> list[str]:
    """The database's files (WAL aside: docs/PRIVACY.md) holding ``word``, after a checkpoint."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        datadir = Path(conn.execute("SHOW data_directory").fetchone()[0])
    return [str(p.relative_to(datadir)) for p in datadir.rglob("*") if p.is_file() and "pg_wal" not in p.parts
            and word.encode() in p.read_bytes()]


def statistics_of(dsn: str, schema: str, table: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {r[0] for r in conn.execute("SELECT attname FROM pg_stats WHERE schemaname = %s AND tablename = %s",
                                           (schema, table))}


async def test_a_forgotten_turn_leaves_no_word_in_the_planner_statistics(make_memory, postgres_section, pg_dsn):
    word = "zqpgstats" + secrets.token_hex(4)
    section = postgres_section("lyra")
    schema = section["schema"]
    m = await make_memory("lyra", plugins=PLUGINS, postgres=section)
    await m.call("store_messages", {"messages": [{"content": f"filler {i} on gardens", "author_name": f"Author{i}",
                                                  "channel": f"c{i}"} for i in range(30)]})
    turn = await m.call("store_message", {"content": f"the secret is {word}", "author_name": f"Ann {word}",
                                          "channel": f"email:{word}", "metadata": {"subject": word}})
    await m.call("store_summary", {"summary_text": f"they spoke of {word}", "message_ids": [turn["id"]]})
    analyze_schema(pg_dsn, schema)  # as autovacuum would
    assert {"id", "created_at"} <= statistics_of(pg_dsn, schema, "messages")  # ANALYZE ran
    await m.call("forget_turns", {"ids": [turn["id"]]})
    assert statistics_holding(pg_dsn, schema, [word]) == []
    analyze_schema(pg_dsn, schema)  # a table left empty (the summaries) is not sampled again: its old values stayed
    assert statistics_holding(pg_dsn, schema, [word]) == []
    assert files_holding(pg_dsn, word) == []  # pg_statistic's own file included

    kept = "zqpgkept" + secrets.token_hex(4)  # a turn that stays is not copied there either
    await m.call("store_message", {"content": f"the other secret is {kept}", "author_name": f"Bo {kept}",
                                   "channel": f"email:{kept}", "metadata": {"subject": kept}})
    analyze_schema(pg_dsn, schema)
    assert statistics_holding(pg_dsn, schema, [kept]) == []


async def test_pps_db_upgrade_removes_the_statistics_an_older_schema_gathered(make_memory, postgres_section, pg_dsn,
                                                                             tmp_path):
    """A schema from before v7 had statistics of every column, and autovacuum had filled them: the upgrade sets
    each text column's target to 0 and removes what is there (the tsv made again: the GIN index with it), and
    rewrites pg_statistic so its file keeps no dead copy."""
    from pps_postgres.schema import NO_STATISTICS
    from pps_postgres.upgrade import upgrade

    word = "zqpgupgrade" + secrets.token_hex(4)
    section = postgres_section("lyra")
    schema = section["schema"]
    m = await make_memory("lyra", home=tmp_path / "a", plugins=PLUGINS, postgres=section)
    await m.call("store_messages", {"messages": [{"content": f"filler {i} on gardens", "author_name": f"Author{i}",
                                                  "channel": f"c{i}", "message_id": f"m{i}", "session_id": f"s{i}",
                                                  "metadata": {"n": i}} for i in range(30)]})
    turn = await m.call("store_message", {"content": f"the secret is {word}", "author_name": f"Ann {word}",
                                          "channel": f"email:{word}", "message_id": f"m-{word}"})
    await m.call("store_summary", {"summary_text": f"they spoke of {word}", "message_ids": [turn["id"]]})
    await m.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the schema as v6 left it
        for table, columns in NO_STATISTICS.items():
            conn.execute(f'ALTER TABLE "{schema}".{table} '
                         + ", ".join(f"ALTER COLUMN {c} SET STATISTICS -1" for c in columns))
        conn.execute(f'DELETE FROM "{schema}".pps_schema_version WHERE version = 7')
    analyze_schema(pg_dsn, schema)
    held = statistics_holding(pg_dsn, schema, [word])
    assert {"messages.content.histogram_bounds", "messages.tsv.most_common_elems", "messages.message_id.histogram_bounds",
            "message_summaries.tsv.most_common_elems"} <= set(held), held

    assert statistics_files_holding(pg_dsn, word)
    assert await upgrade(pg_dsn, schema, "lyra", 10, 10) == (6, 7)
    assert statistics_holding(pg_dsn, schema, [word]) == []
    assert statistics_files_holding(pg_dsn, word) == []  # the removed rows' bytes went with pg_statistic's rewrite
    with psycopg.connect(pg_dsn) as conn:
        targets = dict(conn.execute(
            "SELECT c.relname || '.' || a.attname, a.attstattarget FROM pg_attribute a JOIN pg_class c "
            "ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND a.attnum > 0 AND NOT a.attisdropped", (schema,)).fetchall())
        gin = conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE '%%gin%%' "
                           "ORDER BY 1", (schema,)).fetchall()
    assert {f"{t}.{c}": 0 for t, cols in NO_STATISTICS.items() for c in cols}.items() <= targets.items()
    with psycopg.connect(pg_dsn) as conn:
        valued = {r[0] for r in conn.execute(
            "SELECT tablename || '.' || attname FROM pg_stats WHERE schemaname = %s AND (most_common_vals IS NOT NULL "
            "OR histogram_bounds IS NOT NULL OR most_common_elems IS NOT NULL)", (schema,))}
    assert "messages.id" in valued and not valued & {f"{t}.{c}" for t, cols in NO_STATISTICS.items() for c in cols}
    assert [r[0] for r in gin] == ["idx_messages_tsv", "idx_summaries_tsv"]
    analyze_schema(pg_dsn, schema)
    assert statistics_holding(pg_dsn, schema, [word]) == []

    m = await make_memory("lyra", home=tmp_path / "b", plugins=PLUGINS, postgres=section)
    assert (await m.call("raw_search", {"query": word}))["count"] == 1  # the tsv made again is searched
    await m.call("forget_turns", {"ids": [turn["id"]]})
    assert files_holding(pg_dsn, word) == []  # no dead row of pg_statistic keeps it
    assert (await m.call("raw_search", {"query": "gardens"}))["count"] >= 10


async def test_searches_are_still_planned_on_the_gin_and_hnsw_indexes(postgres_section, pg_dsn):
    """The BM25 queries match a tsquery the planner cannot see (a parameter, a subquery): it took a GIN match's
    default selectivity (0.5 %) with the statistics too, so every plan scans what it did (at 200,000 turns they are
    GIN bitmap scans either way); a vector's statistics were never the HNSW index's cost. Read here: the scans of
    each plan with and without the statistics, the document frequencies from the GIN index, the nearest turns
    from the HNSW index."""
    from pps_postgres.retrieval import index_name
    from pps_postgres.schema import NO_STATISTICS
    from pps_postgres.settings import PostgresSettings
    from pps_postgres.store import PostgresStore
    from pps_postgres.textsearch import _ANY, _LEXEMES, _SCORE
    from psycopg import ClientCursor, sql

    section = postgres_section("plan")
    schema = section["schema"]
    store = PostgresStore(PostgresSettings(**section), "plan")
    await store.open()
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}", public')
            conn.execute(
                "INSERT INTO messages (content, author_name, channel, created_at) SELECT 'turn ' || i || ' about ' "
                "|| (ARRAY['gardens', 'kettles', 'tides', 'lanterns'])[1 + i % 4] || ' and word' || i, 'A' || i % 7, "
                "'c' || i % 5, now() - i * interval '1 minute' FROM generate_series(1, 4000) i")
            conn.execute("INSERT INTO message_vectors (message_id, model, embedding) SELECT m.id, 'm', "
                         "(SELECT array_agg(random() + 0 * m.id + 0 * g)::real[] FROM generate_series(1, 384) g)"
                         "::vector FROM messages m")
        await store.dense.make("m", 384)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # made without statistics of its vectors
            assert conn.execute("SELECT attstattarget FROM pg_attribute WHERE attrelid = %s::regclass",
                                (f'"{schema}".{index_name("m", 384)}',)).fetchone()[0] == 0
        table = sql.Identifier("messages")
        bm25 = {"lexemes": ["kettl", "word17"], "idf": [1.0, 5.0], "any": ["word17"], "after": 0, "n": 10,
                "k1": 1.2, "k1plus": 2.2, "b": 0.75, "avgdl": 5.0, "channel": "c1"}

        def score(channel: str) -> sql.Composable:
            return sql.SQL(_SCORE).format(cand=sql.SQL(_ANY).format(table=table, channel=sql.SQL(channel)))

        queries = {
            "lexemes": (sql.SQL(_LEXEMES).format(table=table), {"terms": ["kettles", "word17"], "known": []}),
            "bm25": (score(""), bm25),
            "bm25 of a channel": (score("AND d.channel = %(channel)s"), bm25),
            "nearest": (sql.SQL("SELECT message_id FROM message_vectors WHERE model = 'm' ORDER BY "
                                "embedding::vector(384) <=> %(q)s::vector(384) LIMIT 40"),
                        {"q": "[" + ",".join("0.5" for _ in range(384)) + "]"}),
        }

        def plans(target: int) -> dict[str, str]:
            with psycopg.connect(pg_dsn, autocommit=True, cursor_factory=ClientCursor) as conn:
                conn.execute(f'SET search_path TO "{schema}", public')
                for t, columns in NO_STATISTICS.items():
                    conn.execute(f"ALTER TABLE {t} " + ", ".join(f"ALTER COLUMN {c} SET STATISTICS {target}"
                                                                for c in columns))
                    conn.execute(f"ANALYZE {t}")
                return {name: "\n".join(sorted(r[0].split("  (cost")[0].strip(" ->") for r in conn.execute(
                            sql.SQL("EXPLAIN ") + query, params).fetchall() if " Scan " in r[0]))
                        for name, (query, params) in queries.items()}

        without = plans(0)
        assert "Bitmap Index Scan on idx_messages_tsv" in without["lexemes"], without["lexemes"]
        assert f"Index Scan using {index_name('m', 384)}" in without["nearest"], without["nearest"]
        assert without == plans(-1)  # with the statistics: the same scans
    finally:
        await store.close()

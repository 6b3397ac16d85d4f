"""What only the PostgreSQL store has to show: its schema, plain SQL writers, several processes on one entity.

Every operation and edge case shared with SQLite runs from plugins/layer_sqlite/tests on both backends.
"""

import asyncio

import psycopg
import pytest

PLUGINS = ["postgres"]


async def open_memory(make_memory, section, name="lyra", home=None, **kw):
    return await make_memory(name, home=home, plugins=PLUGINS, postgres=section(name), **kw)


async def test_turns_written_by_plain_sql_are_searchable_and_normalised(make_memory, postgres_section, pg_dsn):
    m = await open_memory(make_memory, postgres_section)
    schema = postgres_section("lyra")["schema"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{schema}".messages (content, author_name, channel, created_at) VALUES '
                     "('an imported note about lighthouses', 'Importer', 'email:x', '2026-01-26 09:15:00+02:00')")
    found = await m.call("raw_search", {"query": "lighthouses"})
    assert found["results"][0]["author_name"] == "Importer"
    assert found["results"][0]["created_at"] == "2026-01-26T07:15:00.000Z"


async def test_schema_is_versioned_reopens_and_refuses_a_newer_one(make_memory, postgres_section, pg_dsn, tmp_path):
    m = await open_memory(make_memory, postgres_section, home=tmp_path / "a")
    await m.call("store_message", {"content": "persisted", "author_name": "A", "channel": "c"})
    await m.close()
    schema = postgres_section("lyra")["schema"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute(f'SELECT max(version) FROM "{schema}".pps_schema_version').fetchone()[0] >= 1
        kinds = dict(conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'messages'", (schema,)).fetchall())
        assert kinds["created_at"] == "timestamp with time zone" and kinds["tsv"] == "tsvector"
        assert conn.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE '%%gin%%'",
                            (schema,)).fetchone()[0] == 2
    again = await open_memory(make_memory, postgres_section, home=tmp_path / "b")  # another home, same store
    assert (await again.call("raw_search", {"query": "persisted"}))["count"] == 1
    await again.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{schema}".pps_schema_version VALUES (999)')
    newer = await open_memory(make_memory, postgres_section, home=tmp_path / "c")
    health = await newer.layer("raw_capture").health()
    assert not health.available and "newer than this PPS" in health.detail


async def test_a_missing_dsn_is_a_clear_error(make_memory):
    m = await make_memory("lyra", plugins=PLUGINS)
    health = await m.layer("raw_capture").health()
    assert not health.available and "postgres.dsn is not set" in health.detail


async def test_entities_get_separate_schemas_by_default(make_memory, pg_dsn, tmp_path):
    from pps_postgres.settings import PostgresSettings, schema_for

    assert schema_for(PostgresSettings(), "lyra") == "pps_lyra"
    assert schema_for(PostgresSettings(), "Lyra.x") != schema_for(PostgresSettings(), "lyra_x")
    a = await make_memory("ent-a", home=tmp_path / "a", plugins=PLUGINS,
                          postgres={"dsn": pg_dsn, "schema": "t_sep_a"})
    b = await make_memory("ent-b", home=tmp_path / "b", plugins=PLUGINS,
                          postgres={"dsn": pg_dsn, "schema": "t_sep_b"})
    try:
        await a.call("store_message", {"content": "only in a", "author_name": "A", "channel": "c"})
        assert (await b.call("summary_stats"))["total_messages"] == 0
    finally:
        await a.close()
        await b.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA t_sep_a CASCADE")
            conn.execute("DROP SCHEMA t_sep_b CASCADE")


async def test_two_processes_store_each_message_id_exactly_once(make_memory, postgres_section, tmp_path):
    """Two memories (two homes, as two servers would have) racing the same message_ids: one row each."""
    a = await open_memory(make_memory, postgres_section, home=tmp_path / "a")
    b = await open_memory(make_memory, postgres_section, home=tmp_path / "b")

    async def write(m, tag):
        acks = {}
        for k in range(0, 200, 10):
            batch = [{"content": f"turn {i} via {tag}", "author_name": "A", "channel": tag, "message_id": f"m{i}"}
                     for i in range(k, k + 10)]
            out = await m.call("store_messages", {"messages": batch})
            acks.update({x["message_id"]: x["id"] for x in out["acks"]})
        return acks

    first, second = await asyncio.gather(write(a, "a"), write(b, "b"))
    assert first == second  # both were answered with the one row each message_id has
    stats = await a.call("summary_stats")
    assert stats["total_messages"] == 200


async def test_read_cursor_sees_every_turn_once_under_concurrent_writers(make_memory, postgres_section, tmp_path):
    writer_a = await open_memory(make_memory, postgres_section, home=tmp_path / "a")
    writer_b = await open_memory(make_memory, postgres_section, home=tmp_path / "b")
    reader = await open_memory(make_memory, postgres_section, home=tmp_path / "r")
    await reader.call("poll_channels", {"consumer_key": "r", "channel": "mine"})
    seen: list[str] = []
    done = asyncio.Event()

    async def write(m, tag):  # batches: each transaction holds its ids a while before it commits
        for k in range(0, 200, 20):
            await m.call("store_messages", {"messages": [
                {"content": f"{tag} {i}", "author_name": "A", "channel": tag} for i in range(k, k + 20)]})

    async def read():
        while not done.is_set():
            got = await reader.call("poll_channels", {"consumer_key": "r", "channel": "mine", "limit": 1000})
            seen.extend(t["content"] for t in got["turns"])
            await asyncio.sleep(0)

    poller = asyncio.create_task(read())
    await asyncio.gather(write(writer_a, "a"), write(writer_b, "b"), write(writer_a, "c"), write(writer_b, "d"))
    done.set()
    await poller
    got = await reader.call("poll_channels", {"consumer_key": "r", "channel": "mine", "limit": 1000})
    seen.extend(t["content"] for t in got["turns"])
    assert sorted(seen) == sorted(f"{tag} {i}" for tag in "abcd" for i in range(200))


@pytest.mark.parametrize("query", ["to be", "the"])
async def test_stop_words_only_still_search(make_memory, postgres_section, query):
    m = await open_memory(make_memory, postgres_section)
    await m.call("store_message", {"content": "to be or not to be, the question", "author_name": "A",
                                   "channel": "c"})
    assert (await m.call("raw_search", {"query": query}))["count"] == 1


async def test_a_fresh_database_serves_a_second_entity(make_memory, pg_dsn, tmp_path):
    """The vector extension goes to public, not into the first entity's schema (the second could not see it)."""
    import uuid

    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"fresh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = make_conninfo(**{**conninfo_to_dict(pg_dsn), "dbname": name})
    try:
        for entity in ("first", "second"):
            m = await make_memory(entity, home=tmp_path / entity, plugins=PLUGINS, postgres={"dsn": dsn})
            ack = await m.call("store_message", {"content": f"hello {entity}", "author_name": "A", "channel": "c"})
            assert ack["id"] == 1
            await m.close()
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.parametrize("value", ["on", "off"])
async def test_synchronous_commit_is_the_configured_one(make_memory, postgres_section, value):
    m = await make_memory("lyra", plugins=PLUGINS, postgres={**postgres_section("lyra"), "synchronous_commit": value})
    await m.call("store_message", {"content": "durable?", "author_name": "A", "channel": "c"})
    store = m.layer("raw_capture").backend
    assert (await store.fetch("SHOW synchronous_commit"))[0]["synchronous_commit"] == value


async def test_bm25_pruning_to_rare_lexemes_ranks_as_scoring_every_candidate(make_memory, postgres_section,
                                                                             monkeypatch):
    """Candidates from the rarest lexemes first (MaxScore): the same top n, the same scores, as all of them."""
    import random

    from pps_postgres import textsearch

    m = await open_memory(make_memory, postgres_section)
    rng = random.Random(3)
    common = ["garden", "coffee", "morning", "kitchen"]
    rare = ["lighthouse", "cedar", "orchard"]
    texts = [" ".join(rng.choices(common, k=6) + rng.choices(rare, k=rng.randint(0, 2))) for _ in range(400)]
    # the rarest lexeme's rows are not the best: rows with two commoner ones, several times each, beat them
    texts += ["violin garden garden garden garden"] * 12 + ["quartz harbor quartz harbor"] * 30
    await m.call("store_messages", {"messages": [
        {"content": text, "author_name": "A", "channel": rng.choice(["a", "b"])} for text in texts]})
    store = m.layer("raw_capture").backend
    queries = [["violin", "quartz", "harbor"], ["garden", "lighthouse"], ["coffee", "morning", "violin", "quartz"], ["kitchen"], ["cedar"],
               ["garden", "coffee", "morning", "kitchen", "orchard"]]

    async def ranked(limit: int) -> list:
        monkeypatch.setattr(textsearch, "CANDIDATE_ROWS", limit)
        out = []
        async with store.connection() as conn:
            for terms in queries:
                for channel in (None, "a"):
                    found = await textsearch.bm25(conn, "messages", terms, 10, channel, store.corpus_stats)
                    out.append(sorted(((round(s, 9), i) for i, s in found.items()), reverse=True))
        return out

    assert await ranked(1) == await ranked(10**9)


async def test_an_author_another_server_stored_is_known_to_this_one(make_memory, postgres_section, tmp_path,
                                                                    monkeypatch):
    from pps_turns import retriever

    a = await open_memory(make_memory, postgres_section, home=tmp_path / "a")
    b = await open_memory(make_memory, postgres_section, home=tmp_path / "b")
    await a.call("store_message", {"content": "the kettle is broken", "author_name": "Jeff", "channel": "t"})
    await a.call("raw_search", {"query": "kettle"})  # a has read the authors: Jeff
    await b.call("store_messages", {"messages": [
        {"content": "I like jazz music", "author_name": "Jeff", "channel": "t"},  # a tie on words: the
        {"content": "I like jazz music", "author_name": "Melanie", "channel": "t"}]})  # named author decides
    monkeypatch.setattr(retriever, "AUTHORS_TTL_S", 0.0)
    found = await a.call("raw_search", {"query": "What kind of music does Melanie like?", "limit": 1})
    assert found["results"][0]["author_name"] == "Melanie"  # her name in the question is an author, not a word


async def test_a_forgotten_turn_leaves_no_byte_in_the_table_files(make_memory, postgres_section, pg_dsn):
    """VACUUM only marks dead rows reusable: their bytes stay in the table and index files. Forgetting rewrites
    the tables (VACUUM FULL), so no file of the database holds the text (WAL aside: see docs/PRIVACY.md)."""
    import secrets
    from pathlib import Path

    from pps_postgres.testing import analyze_schema, statistics_holding

    word = "zqpgforget" + secrets.token_hex(4)
    m = await open_memory(make_memory, postgres_section)
    await m.call("store_messages", {"messages": [{"content": f"filler {i} on gardens", "author_name": "J",
                                                  "channel": "c"} for i in range(30)]})
    turn = await m.call("store_message", {"content": f"the secret is {word}", "author_name": "J", "channel": "c"})
    await m.call("store_summary", {"summary_text": f"they spoke of {word}", "message_ids": [turn["id"]]})
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        datadir = Path(conn.execute("SHOW data_directory").fetchone()[0])

    def files_holding() -> list[str]:
        return [str(p.relative_to(datadir)) for p in datadir.rglob("*") if p.is_file() and "pg_wal" not in p.parts
                and word.encode() in p.read_bytes()]

    assert files_holding(), "the canary should be in the table files before forgetting"
    analyze_schema(pg_dsn, postgres_section("lyra")["schema"])  # as autovacuum would: pg_statistic's file scanned too
    await m.call("forget_turns", {"ids": [turn["id"]]})
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    assert files_holding() == []
    assert statistics_holding(pg_dsn, postgres_section("lyra")["schema"], [word]) == []


async def test_the_bounded_lexical_pass_finds_the_selective_turns_and_its_reads_do_not_grow(
        make_memory, postgres_section, pg_dsn):
    """As SQLite's (``test_sqlite_lifetime.py``): with the fused search's budget, a question of common words reads
    about as many table blocks at 8,000 turns as at 1,000 (a few more); the exhaustive pass reads them all; a selective word's
    turns are all candidates and the turn holding every word keeps its full score; under the budget nothing
    changes. The reads are PostgreSQL's own count of heap blocks fetched in the transaction."""
    import random

    from pps_postgres import textsearch

    reads = {}
    for n in (1_000, 8_000):
        name = f"lex{n}"
        m = await open_memory(make_memory, postgres_section, name=name)
        schema = postgres_section(name)["schema"]
        rng = random.Random(5)
        rows = [" ".join(rng.choices(["garden", "coffee", "morning", "kitchen", "window"], k=5)) for _ in range(n)]
        for k in rng.sample(range(n), 20):
            rows[k] = "a violin by the window"
        rows[n // 3] = "a violin in the garden, the garden violin"
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            with conn.cursor() as cur:
                cur.executemany(f'INSERT INTO "{schema}".messages (content, author_name, channel, created_at) '
                                "VALUES (%s, %s, %s, now())",
                                [(text, "A", "c") for text in rows])
            conn.execute(f'ANALYZE "{schema}".messages')  # as autovacuum does
        store = m.layer("raw_capture").backend
        async with store.connection() as conn:

            async def run(terms, budget, conn=conn, store=store):
                fetched = "SELECT pg_stat_get_xact_blocks_fetched('messages'::regclass) AS n"
                await textsearch.bm25(conn, "messages", terms, 10, None, store.corpus_stats, budget)  # words known
                async with conn.transaction():
                    before = (await (await conn.execute(fetched)).fetchone())["n"]
                    found = await textsearch.bm25(conn, "messages", terms, 10, None, store.corpus_stats, budget)
                    blocks = (await (await conn.execute(fetched)).fetchone())["n"] - before
                return found, blocks

            exhaustive, _ = await run(["garden", "violin"], 0)
            bounded, _ = await run(["garden", "violin"], 200)
            assert max(bounded, key=bounded.get) == max(exhaustive, key=exhaustive.get)
            both = (await (await conn.execute("SELECT id FROM messages WHERE content LIKE 'a violin in the garden%%'"
                                              )).fetchone())["id"]
            assert bounded[both] == pytest.approx(exhaustive[both])  # the turn with every word keeps its full score
            violins = {r["id"] for r in await (await conn.execute(
                "SELECT id FROM messages WHERE content LIKE '%%violin%%'")).fetchall()}
            wide = await textsearch.bm25(conn, "messages", ["garden", "violin"], 50, None, store.corpus_stats, 200)
            assert violins <= set(wide)  # every turn with the selective word is a candidate
            assert (await run(["garden", "violin"], 100_000))[0] == exhaustive  # under the budget: exhaustive
            absent = (await run(["garden", "violin", "xylophone"], 200))[0]  # a word no turn holds empties nothing
            assert max(absent, key=absent.get) == max(exhaustive, key=exhaustive.get)
            common = ["garden", "coffee"]
            reads[n] = ((await run(common, 0))[1], (await run(common, 200))[1])
        await m.close()
    (ex_small, ours_small), (ex_large, ours_large) = reads[1_000], reads[8_000]
    assert ex_large > 4 * ex_small, reads  # the exhaustive OR reads every garden turn
    assert ours_large < ex_large / 10 and ours_large - ours_small < 10, reads  # the bounded pass does not

"""Issue 37: a large vector backlog on PostgreSQL is embedded with the model's HNSW index out of the way, and the
index made from the rows after (pgvector builds an index several times faster than it takes the same rows one
insert at a time: the inserts were the whole cost of a 200,000-turn drain, bench/RESULTS.md). What must hold
meanwhile: every claimed turn gets its vector once, searches answer exactly (from the table) while the index is
aside, the index is there and used after, also when the server that set it aside stops half-way and another
server finishes the drain; a turn forgotten while its batch is being embedded gets no vector row back.

The bulk threshold is lowered here (the store's constant, 5,000 turns) so a few hundred turns make a bulk."""

from __future__ import annotations

import asyncio

import numpy as np
import psycopg
import pytest
from pps_postgres import retrieval
from pps_postgres.retrieval import index_name
from pps_postgres.settings import PostgresSettings
from pps_postgres.store import PostgresStore
from pps_turns.testing import at, turn

pytestmark = pytest.mark.asyncio

DIM = 16
MODEL = "bulk|author+content"
BATCH = 64


@pytest.fixture
def small_bulk(monkeypatch):
    monkeypatch.setattr(retrieval, "BULK_BACKLOG", 50)
    monkeypatch.setattr(retrieval, "BULK_CHECK_S", 0.0)  # every full batch looks at the backlog


def _vectors(ids) -> list[bytes]:
    """A unit vector per turn id, the same every time it is asked for."""
    out = []
    for i in ids:
        v = np.random.default_rng(int(i)).normal(size=DIM).astype(np.float32)
        out.append((v / np.linalg.norm(v)).tobytes())
    return out


async def _store(store, n, start):
    _acks, new = await store.store([turn(f"bulk turn {start + j}", at=at(j % 60, 1 + (start + j) // 1440 % 28))
                                    for j in range(n)])
    return [t["id"] for t in new]


async def _batch(store, size=BATCH) -> int:
    """One batch of a drain, as the retriever does it: claim, embed, write."""
    async with store.claim_turns_missing_vectors(MODEL, size) as (todo, write):
        if todo:
            await write(_vectors([t["id"] for t in todo]))
    return len(todo)


def _index(dsn, schema):
    """(oid, valid) of the model's HNSW index, None when there is none."""
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT c.oid, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
                            (schema, index_name(MODEL, DIM))).fetchone()


def _vector_rows(dsn, schema):
    with psycopg.connect(dsn) as conn:
        return conn.execute(f'SELECT message_id, count(*) FROM "{schema}".message_vectors GROUP BY 1').fetchall()


async def _nearest(store, turn_id) -> int:
    ids, cos = await store.turn_similarities(MODEL, np.frombuffer(_vectors([turn_id])[0], dtype=np.float32), 5, 0.0)
    return int(ids[int(np.argmax(cos))])


def _uses_index(dsn, schema) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        conn.execute("SET enable_sort = off")  # at a few hundred rows a sort is cheaper; the point is that it can
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT message_id FROM message_vectors WHERE model = '{MODEL}' "
            f"ORDER BY embedding::vector({DIM}) <=> %s::vector({DIM}) LIMIT 10",
            ("[" + ",".join("0.25" for _ in range(DIM)) + "]",)).fetchall())
    return index_name(MODEL, DIM) in plan


async def test_a_bulk_drain_sets_a_small_index_aside_and_makes_it_again_from_the_rows(small_bulk, postgres_section,
                                                                                       pg_dsn):
    section = postgres_section("bulk")
    schema = section["schema"]
    store = PostgresStore(PostgresSettings(**section), "bulk")
    await store.open()
    try:
        first = await _store(store, 30, 0)
        assert await _batch(store) == 30  # a few turns: the index is made at once, and grows with them
        await store.dense.settled()
        before = _index(pg_dsn, schema)
        assert before is not None and before[1]

        more = await _store(store, 400, 30)  # an import: 400 turns wait, the index holds 30
        assert await _batch(store) == BATCH
        await store.dense.settled()
        assert _index(pg_dsn, schema) is None  # set aside
        # searches meanwhile answer from the table, exactly: the turns embedded so far are found by meaning
        assert await _nearest(store, more[10]) == more[10]
        assert await _nearest(store, first[3]) == first[3]

        done = BATCH
        while (n := await _batch(store)) == BATCH:
            done += n
        done += n
        await store.dense.settled()
        assert done == 400
        after = _index(pg_dsn, schema)
        assert after is not None and after[1] and after[0] != before[0]  # made again, from the rows
        assert _uses_index(pg_dsn, schema)
        assert await _nearest(store, more[-1]) == more[-1]
        assert await store.count_turns_missing_vectors(MODEL) == 0
        rows = _vector_rows(pg_dsn, schema)
        assert len(rows) == 430 and {c for _i, c in rows} == {1}
    finally:
        await store.close()


async def test_a_server_that_stops_mid_bulk_leaves_the_index_to_be_made_by_the_one_that_finishes(
        small_bulk, postgres_section, pg_dsn):
    section = postgres_section("fleet")
    schema = section["schema"]
    a, b = (PostgresStore(PostgresSettings(**section), "fleet") for _ in range(2))
    await a.open()
    await b.open()
    try:
        first = await _store(a, 20, 0)
        assert await _batch(b) == 20  # b made the index and holds it as ready
        await b.dense.settled()
        assert await _nearest(b, first[0]) == first[0]
        await _store(b, 300, 20)
        assert await _batch(a) == BATCH  # a sees a bulk: sets the index aside ...
        await a.dense.settled()
        assert _index(pg_dsn, schema) is None
        await a.close()  # ... and stops there (a server shut down, or its drain failing from now on)

        # b drains the rest in one batch that holds all of it: b never saw a bulk (its batch was not full) and its
        # own note still says the index is ready; catching up, it looks again and makes it
        assert await _batch(b, 1000) == 236
        await b.dense.settled()
        found = _index(pg_dsn, schema)
        assert found is not None and found[1]
        assert _uses_index(pg_dsn, schema)
        assert await b.count_turns_missing_vectors(MODEL) == 0
        assert len(_vector_rows(pg_dsn, schema)) == 320
    finally:
        await a.close()
        await b.close()


async def test_a_turn_forgotten_while_its_batch_is_embedded_gets_no_vector_back(small_bulk, postgres_section, pg_dsn):
    section = postgres_section("fg")
    schema = section["schema"]
    store = PostgresStore(PostgresSettings(**section), "fg")
    await store.open()
    try:
        ids = await _store(store, 200, 0)
        victim = ids[5]
        async with store.claim_turns_missing_vectors(MODEL, BATCH) as (todo, write):
            assert victim in {t["id"] for t in todo}
            forget = asyncio.create_task(store.forget([victim], "test", "ids"))
            await asyncio.sleep(0.5)  # the forget waits for the batch (it holds the turns), not the other way
            assert not forget.done()
            await write(_vectors([t["id"] for t in todo]))
        assert (await forget)["forgotten"] == [victim]
        while await _batch(store) == BATCH:
            pass
        await store.dense.settled()
        rows = dict(_vector_rows(pg_dsn, schema))
        assert victim not in rows and len(rows) == 199
        assert await store.count_turns_missing_vectors(MODEL) == 0
        with psycopg.connect(pg_dsn) as conn:
            assert conn.execute(f'SELECT count(*) FROM "{schema}".vector_backlog').fetchone()[0] == 0
    finally:
        await store.close()


async def test_a_forget_that_meets_a_claim_half_way_waits_for_it_instead_of_deadlocking(postgres_section, pg_dsn):
    """A server's claim locks the backlog rows, then the turns (two statements). A forget of one of those turns that
    came in between took the turn's row and then waited for its backlog row (the cascade), while the claim waited for
    the turn: PostgreSQL found the deadlock after a second and failed the forget. Now the forget takes the rows
    derived from the turn first, as the claim does, and waits its turn."""
    from pps_postgres.vectors import CLAIM_MISSING

    section = postgres_section("dl")
    schema = section["schema"]
    store = PostgresStore(PostgresSettings(**section), "dl")
    await store.open()
    try:
        ids = await _store(store, 10, 0)
        victim = ids[3]
        with psycopg.connect(pg_dsn) as side:  # another server, half-way through its claim
            side.execute(f'SET search_path TO "{schema}", public')
            claimed = sorted(r[0] for r in side.execute(CLAIM_MISSING.format(skip="SKIP LOCKED"),
                                                        (BATCH, MODEL, BATCH, MODEL, BATCH)).fetchall())
            assert victim in claimed
            forget = asyncio.create_task(store.forget([victim], "test", "ids"))
            for _ in range(400):  # the forget has reached a row the claim holds
                waiting = side.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                       "AND pid <> pg_backend_pid()").fetchone()[0]
                if waiting or forget.done():
                    break
                await asyncio.sleep(0.025)
            # the claim's second statement, as the store's: the turns, KEY SHARE
            await asyncio.to_thread(side.execute, "SELECT id FROM messages WHERE id = ANY(%s) ORDER BY id "
                                                  "FOR KEY SHARE", (claimed,))
            side.execute("INSERT INTO message_vectors (message_id, model, embedding) "
                         "SELECT unnest(%s::bigint[]), %s, %s::vector",
                         (claimed, MODEL, "[" + ",".join(["0.25"] * DIM) + "]"))
            side.execute("DELETE FROM vector_backlog WHERE message_id = ANY(%s)", (claimed,))
            side.commit()
        assert (await forget)["forgotten"] == [victim]
        rows = dict(_vector_rows(pg_dsn, schema))
        assert victim not in rows and len(rows) == 9
    finally:
        await store.close()

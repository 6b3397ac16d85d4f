"""Turn vectors are searched inside PostgreSQL (pgvector's HNSW index), not in a matrix each server holds."""

import tracemalloc

import numpy as np
import psycopg
import pytest
from pps_postgres.settings import PostgresSettings
from pps_postgres.store import PostgresStore
from pps_turns.testing import at, turn

pytestmark = pytest.mark.asyncio

DIM = 384
MODEL = "bench|author+content"


async def fill(store, rng, n, start=0):
    """``n`` turns with random unit vectors; returns the vectors."""
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    for k in range(0, n, 500):
        _acks, new = await store.store([turn(f"t{start + j}", at=at(j % 60, 1 + (start + j) // 1440 % 28))
                                        for j in range(k, min(n, k + 500))])
        await store.write_turn_vectors(MODEL, new, [v.tobytes() for v in vecs[k:k + len(new)]])
    return vecs


def hnsw_indexes(dsn, schema):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'message_vectors' "
                            "AND indexdef ILIKE '%%USING hnsw%%'", (schema,)).fetchall()


async def test_a_search_leaves_no_vector_matrix_in_the_server(postgres_section, pg_dsn):
    """Before: the first search loaded every vector (and each turn's context vector) into this process and kept
    them, 2 x 4 bytes x 384 x turns. Now what a search allocates is gone when it returns, however many turns."""
    section = postgres_section("vec")
    store = PostgresStore(PostgresSettings(**section), "vec")
    await store.open()
    try:
        rng = np.random.default_rng(3)
        vecs = await fill(store, rng, 4000)
        retained = []
        for n_more in (0, 4000):
            if n_more:
                await fill(store, rng, n_more, start=4000)
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for q in range(3):
                    ids, cos = await store.turn_similarities(MODEL, vecs[q * 101], 200, 0.3)
                    assert int(ids[int(np.argmax(cos))]) == q * 101 + 1  # the turn itself, ids from 1
                    del ids, cos
                retained.append(tracemalloc.get_traced_memory()[0] - before)
            finally:
                tracemalloc.stop()
        # 4,000 turns' vectors alone are 6 MB: the first searches keep far less (a connection's type and plan
        # caches), and at twice the turns nothing grows
        assert retained[0] < 2_500_000 and retained[1] < 500_000, retained
    finally:
        await store.close()


async def test_the_hnsw_index_is_made_once_and_used(postgres_section, pg_dsn):
    section = postgres_section("idx")
    schema = section["schema"]
    stores = [PostgresStore(PostgresSettings(**section), "idx") for _ in range(2)]  # two servers, one entity
    for s in stores:
        await s.open()
    try:
        rng = np.random.default_rng(4)
        vecs = await fill(stores[0], rng, 300)
        await fill(stores[1], rng, 300, start=300)
        for s in stores:
            await s.turn_similarities(MODEL, vecs[0], 10, 0.0)  # exact in the database until the index is made
            await s.dense.settled()
            ids, cos = await s.turn_similarities(MODEL, vecs[0], 10, 0.0)
            assert int(ids[int(np.argmax(cos))]) == 1
        (indexdef,), = hnsw_indexes(pg_dsn, schema)
        assert "vector_cosine_ops" in indexdef and f"vector({DIM})" in indexdef
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the index matches the store's query
            conn.execute(f'SET search_path TO "{schema}", public')
            conn.execute("SET enable_sort = off")  # at 600 rows a sort is cheaper; the point is that it can
            plan = "\n".join(r[0] for r in conn.execute(
                f"EXPLAIN SELECT message_id FROM message_vectors WHERE model = '{MODEL}' "
                f"ORDER BY embedding::vector({DIM}) <=> %s::vector({DIM}) LIMIT 10",
                ("[" + ",".join("0.05" for _ in range(DIM)) + "]",)).fetchall())
        assert "hnsw" in plan.lower() or "idx_message_vectors_hnsw" in plan, plan
    finally:
        for s in stores:
            await s.close()


async def test_a_forgotten_turn_leaves_no_vector_byte_in_the_table_or_index_files(postgres_section, pg_dsn):
    """The HNSW index holds a copy of every vector. Forgetting deletes the row and VACUUM FULL rebuilds the table
    and its indexes, so no file keeps the forgotten vector's bytes (before, the table's and the index's did)."""
    from pathlib import Path

    section = postgres_section("fv")
    store = PostgresStore(PostgresSettings(**section), "fv")
    await store.open()
    try:
        vecs = await fill(store, np.random.default_rng(8), 200)
        await store.dense.settled()
        assert hnsw_indexes(pg_dsn, section["schema"])
        canary = vecs[120].tobytes()[:96]  # pgvector keeps float4 in the machine's byte order
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            datadir = Path(conn.execute("SHOW data_directory").fetchone()[0])

        def files_holding() -> list[str]:
            return [str(p.relative_to(datadir)) for p in datadir.rglob("*") if p.is_file()
                    and "pg_wal" not in p.parts and canary in p.read_bytes()]

        assert len(files_holding()) >= 2, "the vector should be in the table file and the index file"
        await store.forget([121], "test", "ids")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        assert files_holding() == []
        ids, _cos = await store.turn_similarities(MODEL, vecs[120], 10, 0.3)
        assert 121 not in [int(i) for i in ids] and len(ids)
    finally:
        await store.close()

"""Issue 37: building a turn-vector index does not stop writes. The HNSW index of a long history takes minutes
(423 s at 200,000 turns); built inside a transaction it held a SHARE lock on ``message_vectors``, and while it
waited for that lock every server's vector writes queued behind it. Built with ``CREATE INDEX CONCURRENTLY`` it
blocks none of them, and a build that was stopped half-way (an invalid index) is made again, not mistaken for one.

The build is made to last here for certain: another session holds a write transaction on the table (as a server
embedding a batch does) while the build starts, and keeps it open while the test writes more vectors.
"""

from __future__ import annotations

import asyncio

import numpy as np
import psycopg
from pps_postgres.retrieval import index_name


def _blobs(n: int, dim: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [v.tobytes() for v in vecs]


def _index_state(dsn: str, schema: str, name: str) -> bool | None:
    """True valid, False invalid (a build not finished), None absent."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                           "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
                           (schema, name)).fetchone()
    return None if row is None else bool(row[0])


async def test_vector_writes_go_on_while_the_index_is_built(make_memory, postgres_section):
    section = postgres_section("lyra")
    m = await make_memory("lyra", plugins=["postgres"], postgres=section)
    store = m.require_layer("raw_capture").retriever.store
    dim, name = 8, index_name("m", 8)
    first = await m.call("store_messages", {"messages": [
        {"content": f"turn {i} about the lighthouse", "author_name": "Jeff", "channel": "terminal"}
        for i in range(40)]})
    ids = first["ids"]
    turns = await store.turns_by_ids(ids)
    await store.write_turn_vectors("m", turns[:20], _blobs(20, dim, 1))
    await store.dense.settled()
    # an entity from before the index (or a new model): the index is not there yet
    with psycopg.connect(section["dsn"], autocommit=True) as conn:
        conn.execute(f'DROP INDEX "{section["schema"]}"."{name}"')
    store.dense.forget()

    with psycopg.connect(section["dsn"]) as writer:  # a server's batch of vectors, not yet committed
        writer.execute(f'LOCK TABLE "{section["schema"]}".message_vectors IN ROW EXCLUSIVE MODE')
        build = asyncio.create_task(store.dense.make("m", dim))
        for _ in range(200):  # the build has started (and waits for the open batch)
            if _index_state(section["dsn"], section["schema"], name) is not None or build.done():
                break
            await asyncio.sleep(0.05)
        # the other turns' vectors are written meanwhile: not queued behind the build
        await asyncio.wait_for(store.write_turn_vectors("m", turns[20:], _blobs(20, dim, 2)), timeout=30)
        assert not build.done()  # it really was still building
        writer.commit()
    await asyncio.wait_for(build, timeout=60)
    assert _index_state(section["dsn"], section["schema"], name) is True
    with psycopg.connect(section["dsn"]) as conn:
        n = conn.execute(f'SELECT count(*) FROM "{section["schema"]}".message_vectors').fetchone()[0]
    assert n == 40


async def test_a_build_stopped_half_way_is_made_again(make_memory, postgres_section):
    """A stopped concurrent build leaves an invalid index of the same name: it is dropped and built again, and
    searches do not count on it meanwhile."""
    section = postgres_section("lyra")
    m = await make_memory("lyra", plugins=["postgres"], postgres=section)
    store = m.require_layer("raw_capture").retriever.store
    dim, name = 8, index_name("m", 8)
    first = await m.call("store_messages", {"messages": [
        {"content": f"turn {i}", "author_name": "Jeff", "channel": "terminal"} for i in range(10)]})
    turns = await store.turns_by_ids(first["ids"])
    await store.write_turn_vectors("m", turns, _blobs(10, dim, 3))
    await store.dense.settled()
    with psycopg.connect(section["dsn"], autocommit=True) as conn:  # what a cancelled build leaves
        conn.execute(f'UPDATE pg_index SET indisvalid = false WHERE indexrelid = '
                     f'\'"{section["schema"]}"."{name}"\'::regclass')
    store.dense.forget()
    async with store.connection() as conn:
        assert await store.dense.ensure(conn, "m", dim) is False  # not used as it is: made again
    await store.dense.settled()
    assert _index_state(section["dsn"], section["schema"], name) is True
    async with store.connection() as conn:
        assert await store.dense.ensure(conn, "m", dim) is True

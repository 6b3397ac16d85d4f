"""Issue 37, item 2: the vector backlog is a set, not a high-water mark.

Two processes serve one PostgreSQL entity. Ids are taken when a capture starts and become visible when it commits,
so a turn with a lower id can commit after a higher one was stored, embedded and looked past. Here that is made
to happen for certain: a trigger (test-only, in this test's own schema) holds one capture's transaction open, after
its id was taken, until the test lets it go.
"""

from __future__ import annotations

import asyncio
import random

import psycopg
import pytest

LATE = "late: the lighthouse keeper repainted the lamp room a deep sea green"
EARLY = "early: Brandi planted tomatoes along the south fence"


def _hold_late_captures(dsn: str, schema: str, key: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"""
            CREATE FUNCTION "{schema}".hold_late() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.content LIKE 'late:%' THEN PERFORM pg_advisory_xact_lock({key}); END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER hold_late BEFORE INSERT ON "{schema}".messages
                FOR EACH ROW EXECUTE FUNCTION "{schema}".hold_late();
        """)


async def _until_waiting(side: psycopg.Connection, key: int) -> None:
    for _ in range(400):
        row = side.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                           "AND objid = %s", (key,)).fetchone()
        if row and row[0]:
            return
        await asyncio.sleep(0.025)
    raise AssertionError("the late capture never reached its insert")


async def test_a_turn_committed_after_a_higher_id_was_embedded_still_gets_its_vector(make_memory, postgres_section,
                                                                                    pg_dsn, tmp_path, monkeypatch):
    pytest.importorskip("pps_embeddings")
    from pps_turns import retriever

    section = postgres_section("e")
    a = await make_memory("e", home=tmp_path / "a", plugins=["postgres", "embeddings"], postgres=section)
    b = await make_memory("e", home=tmp_path / "b", plugins=["postgres", "embeddings"], postgres=section)
    key = random.randint(1 << 20, 1 << 30)
    _hold_late_captures(pg_dsn, section["schema"], key)
    with psycopg.connect(pg_dsn, autocommit=True) as side:
        side.execute("SELECT pg_advisory_lock(%s)", (key,))
        late = asyncio.create_task(a.call("store_message", {"content": LATE, "author_name": "Jeff",
                                                            "channel": "terminal"}))
        await _until_waiting(side, key)  # its id is taken, its transaction open
        early = await b.call("store_message", {"content": EARLY, "author_name": "Jeff", "channel": "terminal"})
        for m in (a, b):  # each process embeds what it sees (the early turn) and looks past it
            await m.call("raw_search", {"query": "tomatoes"})
            await m.require_layer("raw_capture").retriever.drain()
        side.execute("SELECT pg_advisory_unlock(%s)", (key,))
        stored = await late
    assert stored["id"] < early["id"]  # the lower id committed last

    # a search that does not embed its backlog first says the late turn waits (the count is true) ...
    monkeypatch.setattr(retriever, "QUERY_EMBED_MAX", 0)
    found = await b.call("raw_search", {"query": "what colour is the lamp room", "min_score": 0})
    assert found.get("vectors_pending") == 1, found
    monkeypatch.undo()
    # ... and once the processes drained, no turn is left without its vector
    for m in (a, b):
        await m.require_layer("raw_capture").retriever.drain()
    store = a.require_layer("raw_capture").backend
    assert await store.count_turns_missing_vectors(a.require_layer("raw_capture").retriever.model(a.embedder)) == 0
    found = await a.call("raw_search", {"explain": True, "query": "what colour is the lamp room"})
    assert found["results"][0]["id"] == stored["id"] and found["results"][0]["scores"]["dense"] > 0.2, found

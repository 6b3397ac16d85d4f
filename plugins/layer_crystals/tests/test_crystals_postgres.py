"""Crystals on PostgreSQL (``[crystals] store = "postgres"``): the file layer's operations and contract on a real
server (pgserver), numbering shared by every process, and nothing in the home."""

from __future__ import annotations

import pytest
from pps_postgres import testing as pg_testing
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

from pps_core.errors import NotFound
from pps_core.testing import LayerContract


@pytest.fixture
def crystals_pg(postgres_section):  # noqa: F811
    def section(entity: str = "testentity", **extra):
        s = postgres_section(entity)
        return {"store": "postgres", "dsn": s["dsn"], "schema": s["schema"], **extra}

    return section


class TestPgCrystalContract(LayerContract):
    plugins = ["crystals"]
    layer_name = "crystallization"

    @pytest.fixture
    async def memory(self, make_memory, crystals_pg):
        return await make_memory(plugins=list(self.plugins), crystals=crystals_pg())

    async def add_items(self, memory, texts):
        for t in texts:
            await memory.call("crystallize", {"content": t})


async def test_the_same_operations_on_postgres(make_memory, crystals_pg):
    section = crystals_pg()
    m = await make_memory(plugins=["crystals"], crystals=section)
    for i in range(1, 7):
        out = await m.call("crystallize", {"content": f"Crystal {i}: secret{i} of the lamp."})
        assert out["created"] == f"crystal_{i:03d}.md"
    listing = await m.call("crystal_list")
    assert listing["current"] == [f"crystal_{i:03d}.md" for i in (3, 4, 5, 6)]
    assert listing["archived"] == ["crystal_001.md", "crystal_002.md"]
    got = await m.call("get_crystals", {"count": 5})
    assert [c["name"] for c in got["crystals"]] == [f"crystal_{i:03d}.md" for i in (2, 3, 4, 5, 6)]
    assert got["crystals"][0]["content"] == "Crystal 2: secret2 of the lamp."
    found = await m.call("ambient_recall", {"context": "secret4 lamp"})
    assert "secret4" in found["text"]
    assert (await m.call("crystal_delete"))["deleted"] == "crystal_006.md"  # the window refills from the archive
    assert (await m.call("crystal_list"))["current"] == [f"crystal_{i:03d}.md" for i in (2, 3, 4, 5)]
    pg_testing.analyze_schema(section["dsn"], section["schema"])  # as autovacuum would: no statistic copies a crystal's text
    out = await m.call("crystal_forget", {"name": "crystal_004.md"})
    assert out["current"] == ["crystal_001.md", "crystal_002.md", "crystal_003.md", "crystal_005.md"]
    await m.call("crystal_forget", {"name": "crystal_006.md"})  # deleted, then forgotten too
    with pytest.raises(NotFound):
        await m.call("crystal_forget", {"name": "crystal_004.md"})
    assert "secret4" not in (await m.call("ambient_recall", {"context": "secret4 lamp"}))["text"]
    assert pg_testing.statistics_holding(section["dsn"], section["schema"], ["secret4", "secret6"]) == []
    assert (await m.call("crystallize", {"content": "Crystal 7."}))["created"] == "crystal_007.md"  # never reused
    startup = await m.call("ambient_recall", {"context": "startup"})
    assert "Crystal 7." in startup["text"]
    health = (await m.call("pps_health"))["layers"]["crystallization"]
    assert health["available"] and health["counts"] == {"crystals": 4, "archived": 1}
    assert not (m.home / "crystals").exists()  # nothing in the home, and no owner lock
    assert not (m.home / "owner.lock").exists()


async def test_a_wrong_dsn_is_a_clear_unavailable_layer(make_memory):
    m = await make_memory(plugins=["crystals"], crystals={"store": "postgres", "dsn": "postgresql://nobody@127.0.0.1:1/x"})
    health = (await m.call("pps_health"))["layers"]["crystallization"]
    assert not health["available"] and "127.0.0.1" in health["detail"]


async def test_the_dsn_and_schema_default_to_the_postgres_section(make_memory, postgres_section):  # noqa: F811
    section = postgres_section("testentity")
    m = await make_memory(plugins=["crystals"], crystals={"store": "postgres"}, postgres=section)
    await m.call("crystallize", {"content": "shared through [postgres]"})
    import psycopg

    with psycopg.connect(section["dsn"]) as conn:
        assert conn.execute(f'SELECT content FROM "{section["schema"]}".crystals').fetchall() == [
            ("shared through [postgres]",)]


async def test_a_long_entity_name_keeps_turns_and_crystals_in_one_schema(make_memory, pg_dsn):  # noqa: F811
    """Issue 38: the schema of an entity is named by one rule (pps_postgres.settings.entity_schema) for every layer
    kept in PostgreSQL. An entity name may have 64 characters; ``pps_`` + 64 did not fit PostgreSQL's 63, so no
    layer could open on PostgreSQL (each of four copies of the rule refused it)."""
    import psycopg

    entity = "Lyra." + "x" * 59  # 64 characters, folded (capital, dot): the schema gets a digest of the name
    try:
        m = await make_memory(entity=entity, plugins=["postgres", "crystals"], postgres={"dsn": pg_dsn},
                              crystals={"store": "postgres"})
        await m.call("store_message", {"content": "a turn of the long-named entity", "author_name": "Jeff",
                                       "channel": "terminal:a"})
        await m.call("crystallize", {"content": "Crystal of the long name."})
        with psycopg.connect(pg_dsn) as conn:
            found = {r[0] for r in conn.execute(
                "SELECT table_schema FROM information_schema.tables WHERE table_name IN ('messages', 'crystals') "
                "AND table_schema LIKE 'pps_lyra_x%'")}
        assert len(found) == 1, found  # turns and crystals side by side
        (schema,) = found
        assert len(schema) <= 63
        from pps_postgres.settings import entity_schema

        assert schema == entity_schema(entity)
        # and a name one character different gets another schema (the digest is of the whole name)
        assert entity_schema(entity[:-1] + "y") != schema
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for (name,) in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'pps_lyra_x%'").fetchall():
                conn.execute(f'DROP SCHEMA "{name}" CASCADE')


async def test_an_older_table_loses_the_statistics_autovacuum_gathered(make_memory, crystals_pg, tmp_path):
    import psycopg

    section = crystals_pg()
    m = await make_memory(plugins=["crystals"], home=tmp_path / "a", crystals=section)
    for i in range(1, 6):
        await m.call("crystallize", {"content": f"Crystal {i}: zqold{i} of the lamp."})
    await m.close()
    with psycopg.connect(section["dsn"], autocommit=True) as conn:  # the table as v1 left it, analyzed
        conn.execute(f'ALTER TABLE "{section["schema"]}".crystals ALTER COLUMN content SET STATISTICS -1')
        conn.execute(f'DELETE FROM "{section["schema"]}".crystals_schema_version WHERE version = 2')
    pg_testing.analyze_schema(section["dsn"], section["schema"])
    assert pg_testing.statistics_holding(section["dsn"], section["schema"], ["zqold3"]) == ["crystals.content.histogram_bounds"]
    assert pg_testing.statistics_files_holding(section["dsn"], "zqold3")
    m = await make_memory(plugins=["crystals"], home=tmp_path / "b", crystals=section)
    assert (await m.call("crystal_list"))["current"]  # opened: migrated
    assert pg_testing.statistics_holding(section["dsn"], section["schema"], ["zqold3"]) == []
    assert pg_testing.statistics_files_holding(section["dsn"], "zqold3") == []  # pg_statistic rewritten


async def test_a_forgotten_crystal_leaves_no_byte_in_the_database_files(make_memory, crystals_pg, pg_dsn):  # noqa: F811
    """The forget empties the row (its number is kept); the old row version keeps the text in the table file until
    the table is rewritten (VACUUM FULL), as the turn tables are after a forget (WAL aside: docs/PRIVACY.md)."""
    from pathlib import Path

    import psycopg

    m = await make_memory(plugins=["crystals"], crystals=crystals_pg())
    for i in range(3):
        await m.call("crystallize", {"content": f"Crystal {i}: zqcrystalfile{i} of the lamp."})
    await m.call("crystal_forget", {"name": "crystal_002.md"})
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        datadir = Path(conn.execute("SHOW data_directory").fetchone()[0])
    assert [p for p in datadir.rglob("*") if p.is_file() and "pg_wal" not in p.parts
            and b"zqcrystalfile1" in p.read_bytes()] == []
    assert "zqcrystalfile2" in (await m.call("get_crystals", {"count": 3}))["crystals"][-1]["content"]

"""Word-photos on PostgreSQL (``[chroma] store = "postgres"``): the layer contract and every operation on a real
server (pgserver) with the real local model, searched by pgvector in SQL, shared by memories with homes of their
own (as servers on two machines), nothing in a home."""

from __future__ import annotations

import psycopg
import pytest
from pps_postgres import testing as pg_testing
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

from pps_core.errors import NotFound
from pps_core.testing import LayerContract

PLUGINS = ["chroma", "embeddings"]


def _sources(out):
    return [r["source"] for r in out["results"]]


class TestPgAnchorContract(LayerContract):
    plugins = PLUGINS
    layer_name = "core_anchors"

    @pytest.fixture
    async def memory(self, make_memory, postgres_section):  # noqa: F811
        return await make_memory(plugins=list(self.plugins), chroma={"store": "postgres"},
                                 postgres=postgres_section("testentity"))

    async def add_items(self, memory, texts):
        for i, text in enumerate(texts):
            await memory.call("anchor_save", {"title": f"item {i}", "content": text})


async def test_two_homes_share_every_operation(make_memory, postgres_section, tmp_path):  # noqa: F811
    section = postgres_section("lyra")
    a, b = [await make_memory("lyra", home=tmp_path / m / "lyra", plugins=PLUGINS, chroma={"store": "postgres"},
                              postgres=section) for m in ("a", "b")]
    snow = (await a.call("anchor_save", {"title": "First snow", "content": "We watched the first snow fall over "
                                         "the harbour.", "tags": ["winter"], "location": "balcony"}))["saved"]
    again = (await b.call("anchor_save", {"title": "First snow", "content": "A second first snow."}))["saved"]
    await b.call("anchor_save", {"title": "Taxes", "content": "Quarterly tax forms, dull but done."})
    assert (snow, again) == ("first-snow.md", "first-snow-2.md")  # one name space for both servers

    out = await b.call("anchor_search", {"query": "winter weather by the sea", "limit": 2})
    assert _sources(out)[0] == snow and out["results"][0]["score"] > out["results"][1]["score"]
    assert out["results"][0]["metadata"] == {"kind": "document", "title": "First snow", "tags": ["winter"],
                                             "location": "balcony"}
    page2 = await b.call("anchor_search", {"query": "winter weather by the sea", "limit": 2, "offset": 1})
    assert _sources(page2)[0] == _sources(out)[1]
    assert {p["filename"] for p in (await a.call("anchor_list", {}))["word_photos"]} == {snow, again, "taxes.md"}

    got = await a.call("anchor_get", {"filename": snow})
    assert got["title"] == "First snow" and got["location"] == "balcony"
    await b.call("anchor_edit", {"filename": snow, "content": "The harbour froze over in the night."})
    assert (await a.call("anchor_get", {"filename": snow}))["content"] == "The harbour froze over in the night."
    assert _sources(await a.call("anchor_search", {"query": "frozen harbour at night", "limit": 1})) == [snow]
    startup = await b.call("ambient_recall", {"context": "startup"})
    assert "Quarterly tax forms" in startup["text"]

    pg_testing.analyze_schema(section["dsn"], section["schema"])  # as autovacuum would: no statistic copies a word-photo
    gone = await a.call("anchor_delete", {"filename": "taxes"})
    assert gone["kept_at"].startswith("taxes.md (word_photos_deleted id ")
    assert "taxes.md" not in _sources(await b.call("anchor_search", {"query": "tax forms", "limit": 5}))
    await b.call("anchor_delete", {"filename": "taxes", "forget": True})  # the kept copy, for good
    with pytest.raises(NotFound):
        await a.call("anchor_delete", {"filename": "taxes", "forget": True})
    with psycopg.connect(section["dsn"]) as conn:
        rows = conn.execute(f'SELECT count(*) FROM "{section["schema"]}".word_photos_deleted').fetchone()
    assert rows == (0,)
    assert pg_testing.statistics_holding(section["dsn"], section["schema"], ["Quarterly", "taxes"]) == []
    health = (await a.call("pps_health"))["layers"]["core_anchors"]
    assert health["available"] and health["counts"]["word_photos"] == 2
    for m in (a, b):
        assert not (m.home / "word_photos").exists() and not (m.home / "chroma").exists()



def test_word_photos_are_named_into_the_turns_schema_by_the_one_rule(tmp_path):
    """Issue 38: the word-photo tables take the schema every layer in PostgreSQL takes (a 64-character entity name
    included, which the copy of the rule here refused)."""
    from pps_chroma import pgstore
    from pps_chroma.settings import ChromaSettings
    from pps_postgres.settings import entity_schema

    from pps_core.settings import load_settings

    entity = "Lyra." + "w" * 59
    s = load_settings(entity, tmp_path / "home", timezone="UTC", postgres={"dsn": "postgresql://db.example/pps"})
    assert pgstore.target(ChromaSettings(), s) == ("postgresql://db.example/pps", entity_schema(entity))
    assert len(entity_schema(entity)) <= 63


async def test_older_tables_lose_the_statistics_autovacuum_gathered(make_memory, postgres_section, tmp_path):  # noqa: F811
    section = postgres_section("lyra")
    schema = section["schema"]
    m = await make_memory("lyra", home=tmp_path / "a", plugins=PLUGINS, chroma={"store": "postgres"},
                          postgres=section)
    for i in range(4):
        await m.call("anchor_save", {"title": f"zqold {i}", "content": f"The zqold{i} harbour."})
    await m.call("anchor_delete", {"filename": "zqold-0"})
    await m.close()
    with psycopg.connect(section["dsn"], autocommit=True) as conn:  # the tables as v1 left them, analyzed
        for table, columns in (("word_photos", ("filename", "content")), ("word_photo_vectors", ("filename",
                               "embedding")), ("word_photos_deleted", ("filename", "content"))):
            conn.execute(f'ALTER TABLE "{schema}".{table} '
                         + ", ".join(f"ALTER COLUMN {c} SET STATISTICS -1" for c in columns))
        conn.execute(f'DELETE FROM "{schema}".word_photos_schema_version WHERE version = 2')
    pg_testing.analyze_schema(section["dsn"], schema)
    assert "word_photos.content.histogram_bounds" in pg_testing.statistics_holding(section["dsn"], schema, ["zqold2"])
    assert pg_testing.statistics_files_holding(section["dsn"], "zqold2")
    m = await make_memory("lyra", home=tmp_path / "b", plugins=PLUGINS, chroma={"store": "postgres"},
                          postgres=section)
    assert len((await m.call("anchor_list", {}))["word_photos"]) == 3  # opened: migrated
    assert pg_testing.statistics_holding(section["dsn"], schema, ["zqold"]) == []
    assert pg_testing.statistics_files_holding(section["dsn"], "zqold") == []  # pg_statistic rewritten
    assert _sources(await m.call("anchor_search", {"query": "harbour", "limit": 3}))


async def test_a_forgotten_word_photo_leaves_no_byte_in_the_database_files(make_memory, postgres_section,  # noqa: F811
                                                                           pg_dsn):  # noqa: F811
    """Deleted rows keep their bytes in the table files until the tables are rewritten (VACUUM FULL), as the turn
    tables are after a forget (WAL aside: docs/PRIVACY.md)."""
    from pathlib import Path

    m = await make_memory("lyra", plugins=PLUGINS, chroma={"store": "postgres"}, postgres=postgres_section("lyra"))
    await m.call("anchor_save", {"title": "Kept", "content": "The harbour at dawn."})
    await m.call("anchor_save", {"title": "Gone", "content": "The zqphotofile secret by the harbour."})
    await m.call("anchor_delete", {"filename": "gone"})  # kept in word_photos_deleted first
    await m.call("anchor_delete", {"filename": "gone", "forget": True})
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        datadir = Path(conn.execute("SHOW data_directory").fetchone()[0])
    assert [p for p in datadir.rglob("*") if p.is_file() and "pg_wal" not in p.parts
            and b"zqphotofile" in p.read_bytes()] == []
    assert (await m.call("anchor_get", {"filename": "kept"}))["content"] == "The harbour at dawn."

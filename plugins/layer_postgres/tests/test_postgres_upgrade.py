"""Issue 37: schema upgrades are a step of their own. ``pps db upgrade --entity X`` brings the entity's schema to
this PPS's version (idempotent, one migrator at a time under an advisory lock, safe while servers run); a server
that finds the schema older than its code does not upgrade it behind the fleet's back: its turns are unavailable
and the error names the command (``[postgres] auto_upgrade = true``: a lone server upgrades it itself)."""

from concurrent.futures import ThreadPoolExecutor

import psycopg
from pps_postgres.schema import MIGRATIONS, NO_STATISTICS

from pps_core.testing.server import init_entity, pps


def _make_it_one_version_older(dsn: str, schema: str) -> None:
    """What the schema looked like before the newest migration (v7: no planner statistics of turn text)."""
    assert len(MIGRATIONS) == 7, "a new migration: undo it here instead"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table, columns in NO_STATISTICS.items():
            conn.execute(f'ALTER TABLE "{schema}".{table} '
                         + ", ".join(f"ALTER COLUMN {c} SET STATISTICS -1" for c in columns))
        conn.execute(f'DELETE FROM "{schema}".pps_schema_version WHERE version = 7')


def _versions(dsn: str, schema: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute(f'SELECT version FROM "{schema}".pps_schema_version ORDER BY version')]


async def test_an_older_schema_is_refused_until_pps_db_upgrade_runs(make_memory, postgres_section, tmp_path):
    section = postgres_section("lyra")
    m = await make_memory("lyra", home=tmp_path / "a", plugins=["postgres"], postgres=section)
    await m.call("store_message", {"content": "a turn from before the upgrade", "author_name": "Jeff",
                                   "channel": "terminal"})
    await m.close()
    _make_it_one_version_older(section["dsn"], section["schema"])

    old = await make_memory("lyra", home=tmp_path / "b", plugins=["postgres"], postgres=section)
    health = await old.layer("raw_capture").health()
    assert not health.available
    assert "v6" in health.detail and "v7" in health.detail and "pps db upgrade --entity lyra" in health.detail
    assert _versions(section["dsn"], section["schema"]) == [1, 2, 3, 4, 5, 6]  # the server changed nothing
    await old.close()

    init_entity(tmp_path / "cli", "lyra", "postgres", "[postgres]", f"dsn = {section['dsn']!r}",
                f"schema = {section['schema']!r}")
    with ThreadPoolExecutor(2) as pool:  # two operators at once: one migrates, the other finds it done
        runs = list(pool.map(lambda _i: pps(tmp_path / "cli", "db", "upgrade", "--entity", "lyra", check=False),
                             range(2)))
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    said = sorted(r.stdout.strip() for r in runs)
    assert any(f"{section['schema']}: v6 -> v7" in s for s in said), said
    assert _versions(section["dsn"], section["schema"]) == [1, 2, 3, 4, 5, 6, 7]
    again = pps(tmp_path / "cli", "db", "upgrade", "--entity", "lyra")
    assert f"{section['schema']}: v7, up to date" in again.stdout

    new = await make_memory("lyra", home=tmp_path / "c", plugins=["postgres"], postgres=section)
    health = await new.layer("raw_capture").health()
    assert health.available and health.counts["messages"] == 1 and health.counts["unsummarized"] == 1  # seeded
    found = await new.call("raw_search", {"query": "before the upgrade"})
    assert found["count"] == 1


async def test_a_lone_server_may_upgrade_itself(make_memory, postgres_section, tmp_path):
    section = postgres_section("lyra")
    m = await make_memory("lyra", home=tmp_path / "a", plugins=["postgres"], postgres=section)
    await m.close()
    _make_it_one_version_older(section["dsn"], section["schema"])
    m = await make_memory("lyra", home=tmp_path / "b", plugins=["postgres"],
                          postgres={**section, "auto_upgrade": True})
    assert (await m.layer("raw_capture").health()).available
    assert _versions(section["dsn"], section["schema"]) == [1, 2, 3, 4, 5, 6, 7]


def test_pps_db_upgrade_of_an_unreachable_database_fails_clearly(tmp_path):
    init_entity(tmp_path, "lyra", "postgres", "[postgres]", "dsn = 'postgresql://pps@127.0.0.1:1/pps'",
                "connect_timeout_s = 2")
    out = pps(tmp_path, "db", "upgrade", "--entity", "lyra", check=False)
    assert out.returncode == 1, out
    assert "pps db upgrade:" in out.stderr and "Traceback" not in out.stderr
    sqlite_home = init_entity(tmp_path / "other", "notes", "sqlite")
    assert sqlite_home.exists()
    out = pps(tmp_path / "other", "db", "upgrade", "--entity", "notes", check=False)
    assert out.returncode == 2 and "postgres" in out.stderr  # nothing of this entity is in PostgreSQL

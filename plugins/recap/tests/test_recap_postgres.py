"""The recap in PostgreSQL (``[recap] store = "postgres"``): made through one server, shown at startup by another
with a home of its own, nothing in either home; it is a declared copy of turns and forgetting deletes the row."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"


async def _two_servers(make_memory, postgres_section, tmp_path):  # noqa: F811
    """One entity's recap in PostgreSQL, served from two homes; the session log sits in server a's home."""
    section = postgres_section("lyra")
    recap = {"store": "postgres", "startup_regenerate": False}
    a, b = [await make_memory("lyra", home=tmp_path / side / "lyra", plugins=["postgres", "recap"],
                              postgres=section, recap=recap) for side in ("a", "b")]
    log = a.home / "session.jsonl"
    shutil.copy(FIXTURE, log)
    return section, a, b, log


async def test_one_recap_for_every_server_and_forget_deletes_it(make_memory, postgres_section, tmp_path):  # noqa: F811
    section, a, b, log = await _two_servers(make_memory, postgres_section, tmp_path)
    out = await a.call("session_recap", {"log": str(log), "summarizer": "extractive"})
    assert out["written"] == f"postgres {section['schema']}.recaps" and out["text"]
    startup = await b.call("ambient_recall", {"context": "startup"})
    assert out["text"].splitlines()[1] in startup["text"]  # the other server shows it
    again = await a.call("session_recap", {"log": str(log), "summarizer": "extractive", "if_stale": True})
    assert again["skipped"] and again["written"] is None
    for home in (a.home, b.home):
        assert not (home / "_recap.md").exists() and not (home / "_recap.json").exists()
    health = (await b.call("pps_health"))["layers"]["session_recap"]
    assert health["counts"] == {"recap": 1} and section["schema"] in health["detail"]

    copies = (await b.call("turn_copies"))["copies"]
    assert [c["where"] for c in copies if c["name"] == "session recap"] == [f"postgres {section['schema']}.recaps"]
    await b.call("store_message", {"content": "a turn to forget", "author_name": "Jeff", "channel": "terminal:x"})
    turn = (await b.call("get_turns_since_summary", {}))["turns"][0]
    await b.call("forget_turns", {"ids": [turn["id"]]})
    with psycopg.connect(section["dsn"]) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{section["schema"]}".recaps').fetchone() == (0,)
    assert out["text"].splitlines()[1] not in (await a.call("ambient_recall", {"context": "startup"}))["text"]


async def test_a_forget_through_one_server_marks_the_logs_for_every_server(
        make_memory, postgres_section, tmp_path):  # noqa: F811
    """The per-log forget marks are shared with the recap (issue 25): a forget through server b stops server a
    (its own home) from recapping what its log held then; neither home keeps a marks file."""
    from pps_recap import store

    section, a, b, log = await _two_servers(make_memory, postgres_section, tmp_path)
    assert (await a.call("session_recap", {"log": str(log), "summarizer": "extractive"}))["text"]
    await b.call("store_message", {"content": "a turn to forget", "author_name": "Jeff", "channel": "terminal:x"})
    turn = (await b.call("get_turns_since_summary", {}))["turns"][0]
    await b.call("forget_turns", {"ids": [turn["id"]]})
    assert store.readable_from(a.settings, log) == log.stat().st_size
    again = await a.call("session_recap", {"log": str(log), "summarizer": "extractive"})
    assert again["text"] == "" and again["written"] is None  # nothing said since the forget
    for home in (a.home, b.home):
        assert not (home / store.FORGOTTEN_FILE).exists()
    with open(log, "a") as fh:  # what the log gains afterwards may be recapped
        fh.write(FIXTURE.read_text().splitlines()[-1] + "\n")
    assert store.readable_from(a.settings, log) < log.stat().st_size


async def test_three_servers_starting_at_once_make_the_recap_once(make_memory, postgres_section, tmp_path):  # noqa: F811
    """Issue 37: the startup package of a fleet's servers, asked at once with no recap saved yet: one of them makes
    it (a test-only trigger logs every write of the row), the others do not make it again."""
    import asyncio

    section = postgres_section("lyra")
    log = tmp_path / "session.jsonl"
    shutil.copy(FIXTURE, log)
    recap = {"store": "postgres", "logs": [str(log)]}
    servers = [await make_memory("lyra", home=tmp_path / f"s{i}" / "lyra", plugins=["postgres", "recap"],
                                 postgres=section, recap=recap) for i in range(3)]
    schema = section["schema"]
    await servers[0].call("pps_health")  # the recap's table is made on first use
    with psycopg.connect(section["dsn"], autocommit=True) as conn:
        conn.execute(f"""
            CREATE TABLE "{schema}".recap_writes (at timestamptz DEFAULT now());
            CREATE FUNCTION "{schema}".log_recap() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO "{schema}".recap_writes DEFAULT VALUES; RETURN NEW; END $$;
            CREATE TRIGGER log_recap AFTER INSERT OR UPDATE ON "{schema}".recaps
                FOR EACH ROW EXECUTE FUNCTION "{schema}".log_recap();
        """)
    await asyncio.gather(*(s.call("ambient_recall", {"context": "startup"}) for s in servers))
    with psycopg.connect(section["dsn"]) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}".recap_writes').fetchone() == (1,)
    for s in servers:  # and every server shows it from then on
        assert "Last session" in (await s.call("ambient_recall", {"context": "startup"}))["text"]


async def test_a_long_entity_name_keeps_the_recap_beside_the_turns(make_memory, pg_dsn):  # noqa: F811
    """Issue 38: one schema-naming rule for every layer in PostgreSQL; a 64-character entity name opens (the copies
    of the rule each refused ``pps_`` + 64 characters) and the recap's table is in the turns' schema."""
    from pps_postgres.settings import entity_schema

    entity = "lyra-" + "r" * 59
    schema = entity_schema(entity)
    try:
        m = await make_memory(entity, plugins=["postgres", "recap"], postgres={"dsn": pg_dsn},
                              recap={"store": "postgres", "startup_regenerate": False})
        assert schema in (await m.call("pps_health"))["layers"]["session_recap"]["detail"]
        with psycopg.connect(pg_dsn) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))}
        assert {"messages", "recaps"} <= tables
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

"""``pps restore`` told where to put an entity's PostgreSQL rows (``PPS_POSTGRES_DSN``, issue 37 item 6) puts every
layer kept there in that database: the turns, and the crystals, word-photos and recap that default to ``[postgres]``'s
dsn, not only the turns while the rest stays bound to the database the archive's pps.toml names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures
from psycopg.conninfo import make_conninfo

from pps_core.testing.server import init_entity, pps, pps_env

FIXTURE = Path(__file__).parent.parent / "plugins" / "recap" / "tests" / "fixtures" / "claude_code_session.jsonl"
TABLES = ("messages", "crystals", "word_photos", "recaps")


def _call(root, entity: str, op: str, params: dict | None = None) -> dict:
    return json.loads(pps(root, "call", "--entity", entity, op, json.dumps(params or {})).stdout)


def _counts(dsn: str, schema: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [conn.execute(f'SELECT count(*) FROM "{schema}".{t}').fetchone()[0] for t in TABLES]


def test_a_restore_puts_every_postgres_layer_in_the_database_it_is_told(tmp_path, postgres_section, pg_dsn):  # noqa: F811
    section = postgres_section("lyra")
    schema = section["schema"]
    home = init_entity(tmp_path, "lyra", "postgres,crystals,chroma,embeddings,recap", "[postgres]",
                       f"dsn = {pg_dsn!r}", f"schema = {schema!r}", '[crystals]\nstore = "postgres"',
                       '[chroma]\nstore = "postgres"', '[recap]\nstore = "postgres"')
    _call(tmp_path, "lyra", "store_message", {"content": "the harbour in March", "author_name": "Jeff",
                                              "channel": "terminal:a"})
    _call(tmp_path, "lyra", "crystallize", {"content": "Crystal 1."})
    _call(tmp_path, "lyra", "anchor_save", {"title": "First snow", "content": "Snow over the harbour."})
    shutil.copy(FIXTURE, home / "session.jsonl")
    pps(tmp_path, "recap", "--entity", "lyra", str(home / "session.jsonl"), "--save", "--quiet",
        "--summarizer", "extractive")
    live = _counts(pg_dsn, schema)
    assert all(live), live
    archive = tmp_path / "lyra.tar.gz"
    pps(tmp_path, "backup", str(archive), "--entity", "lyra")

    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # a second database on the same server
        conn.execute("DROP DATABASE IF EXISTS pps_restored")
        conn.execute("CREATE DATABASE pps_restored")
    other = make_conninfo(pg_dsn, dbname="pps_restored")
    try:
        out = pps(tmp_path, "restore", str(archive), "--entity", "lyra2", "--archive-settings", check=False,
                  env=pps_env(tmp_path, PPS_POSTGRES_DSN=other))
        assert out.returncode == 0, out.stdout + out.stderr
        assert _counts(other, schema) == live  # every layer in the database it was told
        assert _counts(pg_dsn, schema) == live  # the live one untouched
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS pps_restored WITH (FORCE)")


def test_the_archive_holds_forget_tokens_and_the_recaps_forgotten_entries(tmp_path, postgres_section, pg_dsn):  # noqa: F811
    """A forget_search confirmation still redeemable and the record of what the session logs held when turns were
    forgotten (so a recap never brings them back) are in the archive, and come back."""
    section = postgres_section("lyra")
    schema = section["schema"]
    home = init_entity(tmp_path, "lyra", "postgres,recap", "[postgres]", f"dsn = {pg_dsn!r}",
                       f"schema = {schema!r}", '[recap]\nstore = "postgres"')
    ids = [_call(tmp_path, "lyra", "store_message", {"content": text, "author_name": "Jeff", "channel": "terminal:a"}
                 )["id"] for text in ("the harbour in March", "the lighthouse lamp")]
    shutil.copy(FIXTURE, home / "session.jsonl")
    pps(tmp_path, "recap", "--entity", "lyra", str(home / "session.jsonl"), "--save", "--quiet",
        "--summarizer", "extractive")
    _call(tmp_path, "lyra", "forget_turns", {"ids": [ids[0]], "requested_by": "test"})
    token = _call(tmp_path, "lyra", "forget_search", {"query": "lighthouse", "requested_by": "test"})["confirm"]
    tables = ("forget_tokens", "recap_forget_marks", "recap_forgotten_entries")
    with psycopg.connect(pg_dsn) as conn:
        live = [conn.execute(f'SELECT count(*) FROM "{schema}".{t}').fetchone()[0] for t in tables]
    assert all(live), live
    archive = tmp_path / "lyra.tar.gz"
    pps(tmp_path, "backup", str(archive), "--entity", "lyra")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the database is lost
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    out = pps(tmp_path, "restore", str(archive), "--entity", "lyra2", "--archive-settings", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    with psycopg.connect(pg_dsn) as conn:
        assert [conn.execute(f'SELECT count(*) FROM "{schema}".{t}').fetchone()[0] for t in tables] == live
    _call(tmp_path, "lyra2", "forget_search", {"query": "lighthouse", "requested_by": "test", "confirm": token})
    with psycopg.connect(pg_dsn) as conn:  # the confirmation taken before the backup still deletes its turn
        assert conn.execute(f'SELECT count(*) FROM "{schema}".messages').fetchone()[0] == 0


def test_a_restore_refuses_when_a_layer_would_land_elsewhere_than_told(tmp_path, postgres_section, pg_dsn):  # noqa: F811
    """The archive's settings bind the crystals to the live database by name (``[crystals] dsn``): a restore told
    ``PPS_POSTGRES_DSN`` stops with a clear error and restores nothing, rather than split the entity in two."""
    schema = postgres_section("lyra")["schema"]
    init_entity(tmp_path, "lyra", "postgres,crystals", "[postgres]", f"dsn = {pg_dsn!r}", f"schema = {schema!r}",
                f'[crystals]\nstore = "postgres"\ndsn = {pg_dsn!r}')
    _call(tmp_path, "lyra", "store_message", {"content": "the harbour", "author_name": "Jeff", "channel": "t"})
    _call(tmp_path, "lyra", "crystallize", {"content": "Crystal 1."})
    archive = tmp_path / "lyra.tar.gz"
    pps(tmp_path, "backup", str(archive), "--entity", "lyra")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS pps_elsewhere")
        conn.execute("CREATE DATABASE pps_elsewhere")
    other = make_conninfo(pg_dsn, dbname="pps_elsewhere")
    try:
        out = pps(tmp_path, "restore", str(archive), "--entity", "lyra2", "--archive-settings", check=False,
                  env=pps_env(tmp_path, PPS_POSTGRES_DSN=other))
        assert out.returncode == 2 and "[crystals] dsn" in out.stderr and "nothing was restored" in out.stderr, \
            out.stdout + out.stderr
        assert not (tmp_path / "lyra2").exists()
        with psycopg.connect(other) as conn:  # not even the turns
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'messages' AND schemaname = %s",
                                (schema,)).fetchone()[0] == 0 or \
                conn.execute(f'SELECT count(*) FROM "{schema}".messages').fetchone()[0] == 0
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS pps_elsewhere WITH (FORCE)")

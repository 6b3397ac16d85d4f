"""The hooks' fast path with the recap in PostgreSQL (``[recap] store = "postgres"``): no ``_recap.md`` in the home
to look at, so SessionStart asks the server (``session_recap(if_stale=true)``): the recap is made once, and
not made again while the newest log is unchanged (it was made again at every session start)."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
from pps_claude_code.fastpath import Light, Remote, _refresh_recap
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

from pps_core.testing.server import init_entity, start_server

FIXTURE = Path(__file__).parents[2] / "recap" / "tests" / "fixtures" / "claude_code_session.jsonl"


def test_session_start_makes_a_shared_recap_once(tmp_path, postgres_section):  # noqa: F811
    section = postgres_section("lyra")
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURE, logs / "s1.jsonl")
    home = init_entity(tmp_path, "lyra", "recap,http", "[postgres]", f"dsn = {section['dsn']!r}",
                       f"schema = {section['schema']!r}", "[recap]", 'store = "postgres"',
                       f"logs = [{str(logs / '*.jsonl')!r}]")
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        toml = {"plugins": ["recap", "http"], "recap": {"store": "postgres", "logs": [str(logs / "*.jsonl")]}}
        light = Light(home, "lyra", toml, {"user_name": "Jeff", "assistant_name": "Lyra"})
        remote = Remote(server.url, server.token("lyra"), 60)

        def saved_at():
            with psycopg.connect(section["dsn"]) as conn:
                return conn.execute(f'SELECT saved_at FROM "{section["schema"]}".recaps').fetchall()

        _refresh_recap(remote, light, "the-new-session")
        first = saved_at()
        assert len(first) == 1
        _refresh_recap(remote, light, "the-new-session")
        assert saved_at() == first  # fresh: not made again
        with open(logs / "s1.jsonl", "a") as fh:  # the session was resumed: the log grew
            fh.write(FIXTURE.read_text().splitlines()[-1] + "\n")
        _refresh_recap(remote, light, "the-new-session")
        assert saved_at() != first
    finally:
        assert server.stop() in (0, -15)
    assert not (home / "_recap.md").exists()
    assert (home / "logs" / "hooks.log").read_text().count("recap regenerated") == 2

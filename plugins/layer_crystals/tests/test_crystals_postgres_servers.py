"""Two `pps serve http` processes (a home each, as on two machines) crystallize into one PostgreSQL table at once:
every acknowledged crystal is stored once with its own text, no number is handed out twice or skipped, a delete
is seen by both, and both list the same window."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import psycopg
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

from pps_core.testing.server import init_entity, start_server


def test_two_servers_number_crystals_without_loss_or_reuse(tmp_path, postgres_section):  # noqa: F811
    section = postgres_section("lyra")
    roots = [tmp_path / "machine0", tmp_path / "machine1"]
    for root in roots:
        root.mkdir()
        init_entity(root, "lyra", "crystals,http", "[crystals]", 'store = "postgres"', f"dsn = {section['dsn']!r}",
                    f"schema = {section['schema']!r}")
    with ThreadPoolExecutor(2) as pool:
        servers = list(pool.map(lambda root: start_server(root, "--entity", "lyra"), roots))
    try:
        def make(i: int) -> tuple[str, str]:
            text = f"crystal from writer {i}"
            out = servers[i % 2].call("crystallize", {"content": text}).json()
            return out["created"], text

        with ThreadPoolExecutor(8) as pool:
            made = list(pool.map(make, range(40)))
        deleted = servers[1].call("crystal_delete").json()["deleted"]
        listings = [s.call("crystal_list").json() for s in servers]
        crystals = [s.call("get_crystals", {"count": 100}).json()["crystals"] for s in servers]
    finally:
        for server in servers:
            assert server.stop() in (0, -15)
    names = [n for n, _t in made]
    assert len(set(names)) == 40, "a number was handed out twice"
    assert sorted(names) == [f"crystal_{i:03d}.md" for i in range(1, 41)]  # none skipped
    assert deleted == "crystal_040.md"
    assert listings[0] == listings[1] and listings[0]["current"] == [f"crystal_{i:03d}.md" for i in (36, 37, 38, 39)]
    assert crystals[0] == crystals[1] and len(crystals[0]) == 39
    with psycopg.connect(section["dsn"]) as conn:
        rows = dict(conn.execute(f'SELECT number, content FROM "{section["schema"]}".crystals').fetchall())
    for name, text in made:
        assert rows[int(name[8:11])] == text, f"{name} holds another call's text"
    for root in roots:
        assert not (root / "lyra" / "crystals").exists()

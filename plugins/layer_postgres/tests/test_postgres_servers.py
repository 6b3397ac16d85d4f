"""Two `pps serve http` processes serve one PostgreSQL-backed entity at once, under concurrent writers.

Each server has a home of its own (as on two machines: the owner lock is per home), both point at the same
schema. Every acknowledged turn is stored exactly once, repeats of a message_id sent to either server are
answered with the first row, summaries stay disjoint. The long version is `bench/load.py --postgres`.
"""

from concurrent.futures import ThreadPoolExecutor

from pps_postgres.testing import audit
from pps_turns.loadgen import report, run_load

from pps_core.testing.server import init_entity, start_server


def test_two_servers_one_entity_store_every_acknowledged_turn_once(tmp_path, postgres_section):
    section = postgres_section("lyra")
    servers = []
    try:
        roots = [tmp_path / "machine0", tmp_path / "machine1"]
        for root in roots:
            root.mkdir()
            init_entity(root, "lyra", "postgres,http", "[postgres]", f"dsn = {section['dsn']!r}",
                        f"schema = {section['schema']!r}")
        with ThreadPoolExecutor(2) as pool:  # both boot at once (and migrate the one schema at once)
            servers.extend(pool.map(lambda root: start_server(root, "--entity", "lyra"), roots))
        tally = run_load(servers, "lyra", seconds=4, writers=4, readers=2, summarizer=True)
        for mid, rid in sorted(tally.acked.items())[:20]:  # a repeat through the other server: the same row
            for server in servers:
                again = server.call("store_message", {"content": "again", "author_name": "x", "channel": "y",
                                                      "message_id": mid}, entity="lyra").json()
                assert again["id"] == rid
    finally:
        for server in servers:
            assert server.stop() in (0, -15)
    result = report(tally, audit(section["dsn"], section["schema"], tally))
    assert result["audit"]["problems"] == []
    assert result["errors"] == []
    assert result["turns_acked"] > 40 and result["repeats_sent"] > 3  # a busy 2-core machine: still real load
    assert result["audit"]["turns"] == result["turns_acked"]  # repeats stored nothing
    assert result["audit"]["summaries"] >= 2
    assert set(result["statuses"]) == {200}
    for server in servers:
        assert "Traceback" not in server.log.read_text()


def test_two_servers_share_one_home_when_every_store_is_a_server(tmp_path, postgres_section):
    """No exclusive layer (postgres + http): no owner lock, so a second server on the same home starts too."""
    section = postgres_section("lyra")
    init_entity(tmp_path, "lyra", "postgres,http", "[postgres]", f"dsn = {section['dsn']!r}",
                f"schema = {section['schema']!r}")
    with ThreadPoolExecutor(2) as pool:
        servers = list(pool.map(lambda i: start_server(tmp_path, "--entity", "lyra", log_name=f"s{i}.log"), (0, 1)))
    try:
        turn = {"content": "one home, two servers", "author_name": "Jeff", "channel": "terminal", "message_id": "x1"}
        first = servers[0].call("store_message", turn, entity="lyra").json()
        again = servers[1].call("store_message", {**turn, "content": "a repeat"}, entity="lyra").json()
        assert again["id"] == first["id"]
        found = servers[1].call("raw_search", {"query": "two servers"}, entity="lyra").json()
        assert [r["id"] for r in found["results"]] == [first["id"]]
    finally:
        for server in servers:
            assert server.stop() in (0, -15)

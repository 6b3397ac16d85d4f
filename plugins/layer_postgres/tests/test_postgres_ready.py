"""Issue 37, item 8: liveness and readiness. A `pps serve http` whose PostgreSQL is down stays alive (``/health``),
says it is not ready (``/ready``: 503) and answers a write with 503 and a clear error at once, instead of a 500
after the pool's timeout; when PostgreSQL is back, so is the server, without a restart."""

from __future__ import annotations

import time

import httpx
from pps_postgres.testing import StoppablePostgres

from pps_core.testing.server import init_entity, start_server

TURN = {"content": "the harbour light is green tonight", "author_name": "Jeff", "channel": "terminal"}


def test_a_server_whose_postgres_is_down_is_alive_not_ready_and_refuses_writes_with_503(tmp_path):
    with StoppablePostgres() as pg:
        # a pool that would wait 30 s for a connection: the answers below must not wait for it
        init_entity(tmp_path, "lyra", "postgres,crystals,http", "[postgres]", f"dsn = {pg.dsn!r}",
                    "connect_timeout_s = 30", "[crystals]", 'store = "postgres"')
        server = start_server(tmp_path, "--entity", "lyra")
        try:
            assert server.call("store_message", TURN).status_code == 200
            ready = httpx.get(f"{server.url}/ready", timeout=10)
            assert ready.status_code == 200 and ready.json()["ready"] is True

            pg.stop()
            assert httpx.get(f"{server.url}/health", timeout=10).json()["ok"] is True  # alive: do not restart it
            for _ in range(2):  # the first call finds the pool's connections cut, the next knows at once
                ready = httpx.get(f"{server.url}/ready", timeout=15)
                assert ready.status_code == 503, ready.text
                assert ready.json()["ready"] is False and "PostgreSQL" in ready.text and pg.dsn not in ready.text
                for _ in range(2):
                    wrote = server.call("store_message", TURN, timeout=15)
                    assert wrote.status_code == 503, wrote.text
                    assert wrote.json()["error"] == "unavailable" and "PostgreSQL" in wrote.json()["message"]
                found = server.call("raw_search", {"query": "harbour light"}, timeout=15)
                assert found.status_code == 503, found.text
                kept = server.call("crystallize", {"content": "The harbour light turned green."}, timeout=15)
                assert kept.status_code == 503 and kept.json()["error"] == "unavailable", kept.text

            pg.start()
            deadline = time.monotonic() + 60
            while httpx.get(f"{server.url}/ready", timeout=15).status_code != 200:
                assert time.monotonic() < deadline, "the server never became ready again"
                time.sleep(0.2)
            assert server.call("store_message", {**TURN, "content": "back again"}).status_code == 200
            assert server.call("crystallize", {"content": "Back again."}).status_code == 200
        finally:
            assert server.stop() in (0, -15)
        assert "Traceback" not in server.log.read_text()


async def test_ready_asks_every_store_of_the_entity_not_only_the_turns(make_memory, postgres_section, tmp_path):
    """Issue 37: ``/ready`` (``Memory.ready``) is 503 when any store the entity needs is down, here the database of
    the crystals and the recap (another server than the turns'), and says which layer, without an address."""
    section = postgres_section("lyra")
    with StoppablePostgres() as other:
        elsewhere = {"store": "postgres", "dsn": other.dsn, "schema": "lyra_side"}
        m = await make_memory("lyra", plugins=["postgres", "crystals", "recap"], postgres=section,
                              crystals=dict(elsewhere), recap={**elsewhere, "startup_regenerate": False})
        await m.call("crystallize", {"content": "Crystal 1."})
        assert await m.ready() == {}
        other.stop()
        waiting = await m.ready()
        assert set(waiting) == {"crystallization", "session_recap"}, waiting
        assert all("PostgreSQL" in why and other.dsn not in why for why in waiting.values()), waiting
        other.start()
        assert await m.ready() == {}

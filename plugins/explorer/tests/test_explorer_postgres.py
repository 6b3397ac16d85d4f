"""The explorer on an entity whose turns are in PostgreSQL (issue 25): Timeline, Forget and Plots show the turns
(list_turns and turn_activity work on that store), and forgetting from the Forget page removes them. A real
`pps serve http` on a real PostgreSQL (pgserver, the ``postgres_section`` fixture of pps-postgres)."""

from __future__ import annotations

import re

import httpx

from pps_core.testing.server import init_entity, start_server


def test_timeline_forget_and_plots_on_postgres(tmp_path, postgres_section):
    section = postgres_section("vega")
    init_entity(tmp_path, "vega", "postgres,http,explorer", "[postgres]", f"dsn = {section['dsn']!r}",
                f"schema = {section['schema']!r}")
    srv = start_server(tmp_path, "--entity", "vega", timeout=120)
    try:
        turns = [{"content": f"Harbour morning {i}", "author_name": "Jeff", "channel": "terminal:abc",
                  "created_at": f"2026-03-02T08:{i:02d}:00Z"} for i in range(6)]
        turns += [{"content": "Owls <b>outside</b>", "author_name": "Lyra", "channel": "discord:home",
                   "created_at": "2026-03-02T20:00:00Z"}]
        r = srv.call("store_messages", {"messages": turns})
        assert r.status_code == 200, r.text
        ids = r.json()["ids"]
        with httpx.Client(base_url=f"{srv.url}/ui/vega", headers=srv.headers("vega"), timeout=60) as ui:
            page = ui.get("/timeline", params={"day": "2026-03-02"})
            assert page.status_code == 200
            assert "not available" not in page.text and "unavailable" not in page.text.lower()
            assert page.text.count("Harbour morning") == 6 and "Owls &lt;b&gt;outside&lt;/b&gt;" in page.text
            home = ui.get("/")
            assert home.status_code == 200 and "Owls &lt;b&gt;outside" in home.text  # the newest turn per channel

            plots = ui.get("/plots", params={"until": "2026-03-03", "days": 7})
            assert plots.status_code == 200 and "not available" not in plots.text
            assert "<svg" in plots.text and "terminal" in plots.text and "discord" in plots.text

            listed = ui.get("/forget", params={"day": "2026-03-02"})
            assert listed.status_code == 200 and "not available" not in listed.text
            assert listed.text.count("Harbour morning") == 6
            shown = ui.post("/forget/confirm", data={"id": [str(ids[0]), str(ids[1])]})
            assert shown.status_code == 200 and "Harbour morning 0" in shown.text, shown.text[-2000:]
            done = ui.post("/forget/do", data={"id": [str(ids[0]), str(ids[1])]})
            assert done.status_code == 200, done.text[-2000:]
            after = ui.get("/timeline", params={"day": "2026-03-02"})
            assert not re.search(r"Harbour morning [01]\b", after.text) and "Harbour morning 2" in after.text
        left = srv.call("list_turns", {"limit": 50}).json()
        assert left["total"] == 5 and ids[0] not in [t["id"] for t in left["turns"]]
    finally:
        srv.stop()
    log = srv.log.read_text()
    assert "Traceback" not in log, log[-3000:]



async def test_ended_and_expired_shared_logins_are_pruned(make_memory, postgres_section, pg_dsn):
    """Logins a fleet shares (``explorer-session:*`` in the store's shared values) do not pile up: a login removes
    those that ended (logged out) or expired (put longer ago than a session lives, 12 hours), and nothing else."""
    import psycopg
    from pps_explorer.session import IDLE_S, Sessions

    from pps_core.contracts import SharedValues

    section = postgres_section("sess")
    memory = await make_memory("sess", plugins=["postgres"], postgres=section)
    store = memory.find(SharedValues)[0]
    sessions = Sessions(None, "/ui/sess", store)
    sids = {}
    for name in ("expired", "ended", "live"):
        sids[name], _session = sessions.create("the-token")
        await sessions.publish(sids[name])
    await sessions.end(sids["ended"])
    await store.shared_put("another-value", "kept")  # the store's other values (the fleet's token): never pruned
    table = f'"{section["schema"]}".shared_values'
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # as if put 12 hours and a minute ago
        conn.execute(f"UPDATE {table} SET updated_at = now() - make_interval(secs => %s) WHERE key = %s "
                     "OR key = 'another-value'", (IDLE_S + 60, Sessions._key(sids["expired"])))

    def keys() -> set[str]:
        with psycopg.connect(pg_dsn) as conn:
            return {key for (key,) in conn.execute(f"SELECT key FROM {table}")}

    assert {Sessions._key(s) for s in sids.values()} <= keys()
    fresh, _session = sessions.create("the-token")
    await sessions.publish(fresh)  # a login
    assert keys() == {Sessions._key(sids["live"]), Sessions._key(fresh), "another-value"}

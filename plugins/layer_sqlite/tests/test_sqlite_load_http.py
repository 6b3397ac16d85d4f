"""Load through a real `pps serve http`: nothing acknowledged is lost or doubled, summaries stay disjoint.

The long version is `bench/load.py` (numbers in bench/RESULTS.md).
"""

from pps_sqlite.testing import audit
from pps_turns.loadgen import report, run_load

from pps_core.testing.server import init_entity, start_server


def test_concurrent_channels_lose_nothing_and_summaries_stay_disjoint(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,crystals,mcp,http")
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        tally = run_load(server, "lyra", seconds=4, writers=4, readers=2, summarizer=True)
        # after the load, every acknowledged repeat still answers as the first call did
        some = sorted(tally.acked.items())[:20]
        for mid, rid in some:
            again = server.call("store_message", {"content": "again", "author_name": "x", "channel": "y",
                                                  "message_id": mid}, entity="lyra").json()
            assert again["id"] == rid
    finally:
        assert server.stop() in (0, -15)
    result = report(tally, audit(tmp_path / "lyra" / "pps.db", tally))
    assert result["audit"]["problems"] == []
    assert result["errors"] == []
    assert result["turns_acked"] > 200 and result["repeats_sent"] > 20
    assert result["audit"]["turns"] == result["turns_acked"]  # repeats stored nothing
    assert result["audit"]["summaries"] >= 3
    assert set(result["statuses"]) == {200}
    assert 0 < result["p95_ms"] < 3000
    assert "Traceback" not in server.log.read_text()

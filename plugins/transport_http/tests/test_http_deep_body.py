"""A request body nested past any parser's depth is a 422 naming the problem, never a 500 (issue 14 item 1)."""

import httpx


def test_a_deeply_nested_body_is_refused_and_nothing_is_stored(tmp_path, pps_cli, start_http):
    pps_cli(tmp_path, "init", "--entity", "deep", "--plugins", "sqlite,http", "--timezone", "UTC")
    server = start_http(tmp_path, "--entity", "deep")
    for depth in (300, 1000, 100_000):
        body = ('{"content": "x", "author_name": "a", "channel": "c", "metadata": ' + '{"k":' * depth + "1"
                + "}" * depth + "}")
        resp = httpx.post(f"{server.url}/tools/store_message", content=body, timeout=30,
                          headers={**server.headers("deep"), "Content-Type": "application/json"})
        assert resp.status_code == 422, (depth, resp.text)
        assert "nest" in resp.json()["message"]
    assert server.call("summary_stats", {}).json()["total_messages"] == 0

"""A tokenless entity on loopback: a web page elsewhere cannot write to it through the visitor's browser."""

import httpx

from pps_core.testing.server import init_entity, start_server


def test_cross_site_post_to_a_tokenless_entity_is_refused(tmp_path):
    init_entity(tmp_path, "bare", "sqlite,mcp,http")
    (tmp_path / "bare" / "token").unlink()
    server = start_server(tmp_path, "--entity", "bare")
    try:
        url = f"{server.url}/tools/store_message"
        body = '{"content": "planted", "author_name": "web", "channel": "x"}'
        evil = httpx.post(url, content=body, headers={"Origin": "https://evil.example", "Content-Type": "text/plain"})
        assert evil.status_code == 403 and "web pages" in evil.json()["message"]
        local = httpx.post(url, content=body, headers={"Content-Type": "application/json"})
        assert local.status_code == 200
        stats = httpx.post(f"{server.url}/tools/summary_stats", json={}).json()
    finally:
        server.stop()
    assert stats["total_messages"] == 1

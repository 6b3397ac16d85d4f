"""`pps serve http --no-mcp`: REST only (what the Claude Code hooks' server and the listener beside stdio MCP
need), without building MCP session managers or importing the MCP SDK."""

from __future__ import annotations

import httpx

from pps_core.testing.server import init_entity, start_server


def test_no_mcp_serves_rest_only(tmp_path):
    init_entity(tmp_path, "lyra", "ledger,http,mcp")
    server = start_server(tmp_path, "--entity", "lyra", "--no-mcp")
    try:
        token = (tmp_path / "lyra" / "token").read_text().strip()
        auth = {"Authorization": f"Bearer {token}"}
        answer = httpx.post(f"{server.url}/tools/ledger_append", json={"text": "rest only"}, headers=auth)
        assert answer.status_code == 200 and answer.json() == {"count": 1}
        assert "ledger_list" in [t["name"] for t in httpx.get(f"{server.url}/tools", headers=auth).json()["tools"]]
        for path in ("/mcp", "/entities/lyra/mcp"):
            assert httpx.post(f"{server.url}{path}", json={}, headers=auth).status_code == 404, path
        assert "(REST /tools)" in server.log.read_text()
    finally:
        assert server.stop() == 0

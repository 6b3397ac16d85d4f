"""Protocol truth over HTTP (issue 13): a wrong bearer token is 401 invalid_token with a challenge (RFC 6750, MCP's
authorization spec); an unknown operation reads the same through a forwarding server as in-process."""

from __future__ import annotations

import httpx
import pytest

from pps_core.errors import UnknownOperation
from pps_core.forward import try_forward
from pps_core.settings import load_settings


def test_a_wrong_token_is_401_invalid_token_with_a_challenge(server):
    for path, body in (("/tools/crystallize", {"content": "intruder"}), ("/entities/nexus/tools/crystal_list", {})):
        wrong = httpx.post(f"{server.url}{path}", json=body, headers={"Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 401, wrong.text
        assert wrong.headers["www-authenticate"] == 'Bearer realm="pps", error="invalid_token"'
        assert wrong.json()["error"] == "unauthorized" and "does not grant access" in wrong.json()["message"]
    missing = httpx.post(f"{server.url}/tools/crystal_list", json={})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == 'Bearer realm="pps"'
    mcp = httpx.post(f"{server.url}/mcp", headers={"Authorization": "Bearer wrong",
                                                   "Accept": "application/json, text/event-stream"},
                     json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert mcp.status_code == 401 and "invalid_token" in mcp.headers["www-authenticate"]
    docs = httpx.get(f"{server.url}/openapi.json", headers={"Authorization": "Bearer nope"})
    assert docs.status_code == 401 and docs.headers["www-authenticate"].startswith("Bearer")


def test_an_unknown_operation_reads_the_same_forwarded(server, monkeypatch):
    monkeypatch.setenv("PPS_ROOT", str(server.root))
    with pytest.raises(UnknownOperation) as err:
        try_forward(load_settings("lyra"), "crystalize", {"content": "x"})
    message = err.value.message
    assert message.startswith("unknown operation 'crystalize' for entity 'lyra' (did you mean 'crystallize'")
    assert "loaded plugins: sqlite, crystals" in message  # the owner's words, forwarded as they are
    assert "http://" not in message and err.value.status == 404
    rest = httpx.post(f"{server.url}/entities/nexus/tools/raw_search", json={"query": "x"},
                      headers=server.auth("nexus"))  # nexus has no sqlite: its own words, not a bare 404
    assert rest.status_code == 404 and rest.json()["error"] == "unknown_operation" and "'nexus'" in rest.text
    anonymous = httpx.post(f"{server.url}/tools/crystalize", json={})
    assert anonymous.status_code == 401 and "crystalize" not in anonymous.text  # no catalog without the token

"""Host names are case-insensitive (issue 35 item 12): MCP over HTTP answered 421 to ``Host: LOCALHOST:<port>``
where the REST routes (and the explorer, through the same check) accept it. One rule on every route, over a real
HTTP server: a loopback name in any case passes, a look-alike (a trailing dot included) is refused everywhere."""

import httpx
import pytest

from pps_core.testing.server import init_entity, start_server

MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostcase")
    init_entity(root, "bare", "crystals,mcp,http")
    (root / "bare" / "token").unlink()
    init_entity(root, "lyra", "crystals,mcp,http")
    server = start_server(root, "--entity", "bare", "--entities", "lyra")
    server.port = int(server.url.rsplit(":", 1)[1])
    yield server
    server.stop()


def _both(srv, prefix: str, **headers) -> tuple[int, int]:
    rest = httpx.post(f"{srv.url}{prefix}/tools/crystal_list", json={}, headers=headers, timeout=30)
    mcp = httpx.post(f"{srv.url}{prefix}/mcp", json=MCP_INIT, headers={**MCP_HEADERS, **headers}, timeout=30)
    return rest.status_code, mcp.status_code


@pytest.mark.parametrize("name", ["LOCALHOST", "LocalHost", "127.0.0.1", "[::1]"])
def test_a_loopback_host_in_any_case_reaches_rest_and_mcp(srv, name):
    port = srv.port
    host, origin = f"{name}:{port}", f"HTTP://{name}:{port}"
    assert _both(srv, "", Host=host) == (200, 200)  # the entity without a token: the Host is its only guard
    assert _both(srv, "", Host=host, Origin=origin) == (200, 200)
    assert _both(srv, "/entities/lyra", Host=host, **srv.headers("lyra")) == (200, 200)
    assert _both(srv, "/entities/lyra", Host=host, Origin=origin, **srv.headers("lyra")) == (200, 200)


@pytest.mark.parametrize("host", ["localhost.:{port}", "LOCALHOST.:{port}", "LOCALHOST.EVIL.EXAMPLE:{port}",
                                  "127.0.0.1.:{port}"])
def test_a_look_alike_host_is_refused_on_rest_and_mcp(srv, host):
    rest, mcp = _both(srv, "", Host=host.format(port=srv.port))
    assert rest == 403 and mcp in (403, 421), (rest, mcp)

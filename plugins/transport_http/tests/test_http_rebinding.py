"""A tokenless entity on loopback answers only requests whose Origin (if any) and Host are exactly this
server: a web page elsewhere (cross-site request, DNS rebinding, look-alike names) reaches nothing."""

import httpx
import pytest

from pps_core.testing.server import init_entity, start_server

MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "page", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    root = tmp_path_factory.mktemp("rebind")
    init_entity(root, "bare", "crystals,mcp,http")
    (root / "bare" / "token").unlink()
    init_entity(root, "lyra", "crystals,mcp,http")
    server = start_server(root, "--entity", "bare", "--entities", "lyra")
    server.port = int(server.url.rsplit(":", 1)[1])
    yield server
    server.stop()


def _store(server, **headers):
    return httpx.post(f"{server.url}/tools/crystallize", headers={"Content-Type": "text/plain", **headers},
                      content='{"content": "planted by a web page"}')


def _count(server) -> int:
    listing = httpx.post(f"{server.url}/tools/crystal_list", json={}).json()
    return len(listing["current"]) + len(listing["archived"])


def test_look_alike_and_foreign_origins_are_refused(bare):
    port = bare.port
    before = _count(bare)
    for origin in ["http://127.attacker.example", "http://127.0.0.1.nip.io", "http://127.1",
                   f"http://127.attacker.example:{port}", f"http://127.0.0.1.nip.io:{port}", f"http://127.1:{port}",
                   f"http://127.0.0.2:{port}", f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}",
                   f"http://localhost:{port}.evil.example", f"http://user@127.0.0.1:{port}", "null"]:
        r = _store(bare, Origin=origin)
        assert r.status_code == 403, (origin, r.status_code, r.text)
        assert "web pages" in r.json()["message"]
        listing = httpx.get(f"{bare.url}/tools", headers={"Origin": origin})
        assert listing.status_code == 403, origin
    assert _count(bare) == before


def test_dns_rebinding_host_is_refused_on_rest_and_mcp(bare):
    port = bare.port
    before = _count(bare)
    for host in [f"attacker.example:{port}", f"127.0.0.1.nip.io:{port}", f"127.1:{port}", "127.0.0.1",
                 f"127.0.0.1:{port + 1}"]:
        r = _store(bare, Host=host)
        assert r.status_code == 403 and "Host" in r.json()["message"], (host, r.status_code, r.text)
        mcp = httpx.post(f"{bare.url}/mcp", json=MCP_INIT, headers={**MCP_HEADERS, "Host": host})
        assert mcp.status_code in (403, 421), (host, mcp.status_code, mcp.text)
    assert _count(bare) == before


def test_mcp_refuses_a_page_on_another_local_port(bare):
    r = httpx.post(f"{bare.url}/mcp", json=MCP_INIT,
                   headers={**MCP_HEADERS, "Origin": f"http://127.0.0.1:{bare.port + 1}"})
    assert r.status_code == 403, r.text


def test_this_servers_own_origin_and_names_are_accepted(bare):
    port = bare.port
    before = _count(bare)
    for origin in [f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}", None]:
        r = _store(bare, **({"Origin": origin} if origin else {}))
        assert r.status_code == 200, (origin, r.text)
    assert httpx.post(f"{bare.url}/tools/pps_health", json={}, headers={"Host": f"localhost:{port}"}).status_code == 200
    ok = httpx.post(f"{bare.url}/mcp", json=MCP_INIT, headers={**MCP_HEADERS, "Origin": f"http://127.0.0.1:{port}"})
    assert ok.status_code == 200, ok.text
    assert _count(bare) == before + 4


def test_openapi_and_docs_show_a_token_protected_entity_only_to_its_token(bare):
    anonymous = httpx.get(f"{bare.url}/openapi.json")
    assert anonymous.status_code == 200
    paths = anonymous.json()["paths"]
    assert "/entities/bare/tools/crystallize" in paths and "/tools/crystallize" in paths
    assert not [p for p in paths if "lyra" in p] and "lyra" not in anonymous.text
    holder = httpx.get(f"{bare.url}/openapi.json", headers=bare.headers("lyra")).json()["paths"]
    assert "/entities/lyra/tools/crystallize" in holder
    assert httpx.get(f"{bare.url}/openapi.json", headers={"Host": "attacker.example"}).status_code in (401, 403)
    # /docs is a shell without data (issue 39): its script asks /openapi.json, which refuses the rebound page
    shell = httpx.get(f"{bare.url}/docs", headers={"Host": "attacker.example"})
    assert shell.status_code == 200 and "bare" not in shell.text and "crystallize" not in shell.text
    assert httpx.get(f"{bare.url}/docs").status_code == 200
    assert httpx.get(f"{bare.url}/redoc").status_code == 404

"""Issue 37, items 3-5: what a client holds works on any server of a fleet. Three `pps serve http` processes (homes of
their own, one token copied to each, as README says) serve one PostgreSQL entity; a client's requests go round-robin
across them, as behind a load balancer without sticky sessions."""

from __future__ import annotations

import itertools
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pps_core.testing.server import init_entity, start_server


@pytest.fixture(scope="module")
def fleet(pg_dsn, tmp_path_factory):
    schema = f"t{uuid.uuid4().hex[:10]}_fleet"
    base = tmp_path_factory.mktemp("fleet")
    roots = [base / f"machine{i}" for i in range(3)]
    for root in roots:
        root.mkdir()
        init_entity(root, "lyra", "postgres,explorer,http", "[postgres]", f"dsn = {pg_dsn!r}", f"schema = {schema!r}")
    for root in roots[1:]:  # one token for the fleet
        shutil.copyfile(roots[0] / "lyra" / "token", root / "lyra" / "token")
    with ThreadPoolExecutor(3) as pool:
        servers = list(pool.map(lambda root: start_server(root, "--entity", "lyra"), roots))
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class RoundRobin(httpx2.AsyncBaseTransport):
    """A load balancer without sticky sessions: each request goes to the next server."""

    def __init__(self, servers) -> None:
        self.ports = itertools.cycle([int(s.url.rsplit(":", 1)[1]) for s in servers])
        self.inner = httpx2.AsyncHTTPTransport()
        self.seen: list[int] = []

    async def handle_async_request(self, request):
        port = next(self.ports)
        self.seen.append(port)
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # the initialize handshake (Mcp-Session-Id), and the newest
async def test_an_mcp_session_works_on_any_server(fleet, mode):
    balancer = RoundRobin(fleet)
    http = httpx2.AsyncClient(headers=fleet[0].auth(), timeout=30, transport=balancer)
    async with Client(streamable_http_client(f"{fleet[0].url}/mcp", http_client=http), mode=mode) as client:
        for i in range(4):
            stored = await client.call_tool("store_message", {"content": f"through the balancer {i}",
                                                              "author_name": "Jeff", "channel": "terminal"})
            assert not stored.is_error, stored
        tools = await client.list_tools()
        assert "raw_search" in {t.name for t in tools.tools}
        found = await client.call_tool("raw_search", {"query": "balancer"})
        assert not found.is_error and "through the balancer 3" in str(found.content)
    assert len(set(balancer.seen)) == 3  # every server answered part of the one session


def test_an_explorer_login_works_on_any_server_and_a_logout_ends_it_everywhere(fleet):
    import re

    import httpx

    first = httpx.Client(base_url=f"{fleet[0].url}/ui/lyra", timeout=30)
    nonce = re.search(r'name="nonce" value="([^"]+)"', first.get("/login").text).group(1)
    answer = first.post("/login", data={"nonce": nonce, "token": fleet[0].token("lyra")})
    assert answer.status_code == 303
    cookie = {"pps_ui_session": first.cookies["pps_ui_session"]}
    pages = [httpx.get(f"{s.url}/ui/lyra/timeline", cookies=cookie, timeout=30) for s in fleet]
    assert [p.status_code for p in pages] == [200, 200, 200], [p.headers.get("location") for p in pages]
    csrf = re.search(r'name="csrf-token" content="([^"]+)"', pages[1].text).group(1)
    out = httpx.post(f"{fleet[1].url}/ui/lyra/logout", data={"csrf": csrf}, cookies=cookie, timeout=30)
    assert out.status_code == 303
    after = [httpx.get(f"{s.url}/ui/lyra/timeline", cookies=cookie, timeout=30) for s in fleet]
    assert [(p.status_code, p.headers.get("location")) for p in after] == [(303, "/ui/lyra/login")] * 3


def test_a_token_rotated_on_one_server_is_refused_by_every_server(fleet):
    """Last in this module: it changes the fleet's token. Each server's home keeps its copy of the old one."""
    import time

    import httpx

    old = fleet[0].token("lyra")
    rotated = fleet[0].call("pps_regenerate_token")
    assert rotated.status_code == 200, rotated.text
    new = fleet[0].token("lyra")
    assert new != old and fleet[1].token("lyra") == old  # the other homes were not touched

    def status(server, token):
        return httpx.post(f"{server.url}/tools/pps_health", json={}, headers={"Authorization": f"Bearer {token}"},
                          timeout=30).status_code

    deadline = time.monotonic() + 10  # the servers hear of it within a second (they poll the store)
    while {status(s, old) for s in fleet} != {401}:
        assert time.monotonic() < deadline, [status(s, old) for s in fleet]
        time.sleep(0.1)
    assert [status(s, new) for s in fleet] == [200, 200, 200]
    # a server started later, with its home's stale copy, takes the fleet's token from the store too
    again = start_server(fleet[1].root, "--entity", "lyra", log_name="late.log")
    try:
        assert status(again, old) == 401 and status(again, new) == 200
    finally:
        again.stop()

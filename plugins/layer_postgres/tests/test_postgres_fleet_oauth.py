"""Issue 37/41: an MCP client connects through OAuth to an entity a fleet serves. Two `pps serve http` processes
(homes of their own, one token copied to each) serve one PostgreSQL entity behind one public URL, as behind a load
balancer without sticky sessions: the client registers and is sent to the approval page on one server, the owner
approves on the other (the token page, or the explorer's login), the code is exchanged on either (once only, across
the fleet), and the access token calls tools/list on both."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import shutil
import uuid
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pps_core.testing.server import init_entity, start_server

PUBLIC = "http://127.0.0.1:9"  # the balancer's origin, as every server is told (never dialled: rewritten below)
REDIRECT = "http://127.0.0.1:1/callback"


@pytest.fixture(scope="module")
def fleet(pg_dsn, tmp_path_factory):
    schema = f"t{uuid.uuid4().hex[:10]}_oauth"
    base = tmp_path_factory.mktemp("oauthfleet")
    roots = [base / f"machine{i}" for i in range(2)]
    for root in roots:
        root.mkdir()
        init_entity(root, "lyra", "postgres,explorer,http", "[postgres]", f"dsn = {pg_dsn!r}", f"schema = {schema!r}")
    shutil.copyfile(roots[0] / "lyra" / "token", roots[1] / "lyra" / "token")  # one token for the fleet
    servers = [start_server(root, "--entity", "lyra", "--public-url", PUBLIC) for root in roots]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def on(server, url: str) -> str:
    """A URL of the public origin, sent to one server (what the balancer does)."""
    assert url.startswith(PUBLIC), url
    return server.url + url[len(PUBLIC):]


def authorize(server) -> tuple[dict, str, str]:
    """A client registered, sent to the authorization endpoint on ``server``: (client, the approval page's URL, the
    PKCE verifier)."""
    client = httpx.post(f"{server.url}/entities/lyra/oauth/register",
                        json={"redirect_uris": [REDIRECT], "client_name": "fleet client"}, timeout=30)
    assert client.status_code == 201, client.text
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    answer = httpx.get(f"{server.url}/entities/lyra/oauth/authorize", timeout=30, params={
        "response_type": "code", "client_id": client.json()["client_id"], "redirect_uri": REDIRECT, "state": "s1",
        "code_challenge": challenge, "code_challenge_method": "S256", "resource": f"{PUBLIC}/entities/lyra/mcp"})
    assert answer.status_code == 302, answer.text
    return client.json(), answer.headers["location"], verifier


def code_of(answer: httpx.Response) -> str:
    assert answer.status_code == 303, answer.text
    back = urlsplit(answer.headers["location"])
    assert back.geturl().startswith(REDIRECT) and parse_qs(back.query)["state"] == ["s1"]
    return parse_qs(back.query)["code"][0]


def exchange(server, client: dict, code: str, verifier: str) -> httpx.Response:
    return httpx.post(f"{server.url}/entities/lyra/oauth/token", timeout=30, data={
        "client_id": client["client_id"], "client_secret": client["client_secret"], "grant_type": "authorization_code",
        "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier, "resource": f"{PUBLIC}/entities/lyra/mcp"})


async def tool_names(server, bearer: str) -> set[str]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=30)
    async with Client(streamable_http_client(f"{server.url}/entities/lyra/mcp", http_client=http)) as session:
        return {tool.name for tool in (await session.list_tools()).tools}


async def test_authorized_on_one_server_approved_on_another_and_the_token_works_on_both(fleet):
    a, b = fleet
    client, page_url, verifier = authorize(a)
    browser = httpx.Client(timeout=30)
    page = browser.get(on(b, page_url))  # the owner's browser reaches the other server
    assert page.status_code == 200 and "fleet client" in page.text, page.text
    fields = dict(re.findall(r'name="(request|csrf)" value="([^"]*)"', page.text))
    code = code_of(browser.post(on(b, f"{PUBLIC}/entities/lyra/oauth/approve"),
                                data={**fields, "token": a.token("lyra"), "decision": "approve"}))
    tokens = exchange(a, client, code, verifier)
    assert tokens.status_code == 200, tokens.text
    again = exchange(b, client, code, verifier)  # a code is used once, whichever server sees it next
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text
    access = tokens.json()["access_token"]
    for server in (a, b):
        assert "raw_search" in await tool_names(server, access)
    # refreshed on b: the new token works on a, and the old one is refused on both
    refreshed = httpx.post(f"{b.url}/entities/lyra/oauth/token", timeout=30, data={
        "client_id": client["client_id"], "client_secret": client["client_secret"], "grant_type": "refresh_token",
        "refresh_token": tokens.json()["refresh_token"]})
    assert refreshed.status_code == 200, refreshed.text
    assert "raw_search" in await tool_names(a, refreshed.json()["access_token"])
    for server in (a, b):
        old = httpx.post(f"{server.url}/entities/lyra/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={"Authorization": f"Bearer {access}", "Accept": "application/json, text/event-stream"},
                         timeout=30)
        assert old.status_code == 401, old.text


async def test_approved_in_the_explorer_of_another_server(fleet):
    a, b = fleet
    client, page_url, verifier = authorize(b)
    request = parse_qs(urlsplit(page_url).query)["request"][0]
    explorer = httpx.Client(base_url=f"{a.url}/ui/lyra", timeout=30)
    nonce = re.search(r'name="nonce" value="([^"]+)"', explorer.get("/login").text).group(1)
    assert explorer.post("/login", data={"nonce": nonce, "token": a.token("lyra")}).status_code == 303
    shown = explorer.get("/connect", params={"request": request})
    assert shown.status_code == 200 and "fleet client" in shown.text, shown.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', shown.text) or re.search(
        r'name="csrf-token" content="([^"]+)"', shown.text)
    code = code_of(explorer.post("/connect", data={"request": request, "decision": "approve", "csrf": csrf.group(1)}))
    gone = httpx.get(on(b, page_url), timeout=30)  # answered: unknown on every server
    assert gone.status_code == 400 and "unknown or expired" in gone.text
    tokens = exchange(b, client, code, verifier)
    assert tokens.status_code == 200, tokens.text
    assert "raw_search" in await tool_names(a, tokens.json()["access_token"])


def test_a_code_exchanged_on_both_servers_at_once_is_used_once(fleet):
    from concurrent.futures import ThreadPoolExecutor

    a, b = fleet
    for _ in range(3):
        client, page_url, verifier = authorize(a)
        browser = httpx.Client(timeout=30)
        page = browser.get(on(a, page_url))
        fields = dict(re.findall(r'name="(request|csrf)" value="([^"]*)"', page.text))
        code = code_of(browser.post(on(a, f"{PUBLIC}/entities/lyra/oauth/approve"),
                                    data={**fields, "token": a.token("lyra"), "decision": "approve"}))
        with ThreadPoolExecutor(4) as pool:
            tries = [pool.submit(exchange, server, client, code, verifier) for server in (a, b, a, b)]
            answers = [t.result() for t in tries]
        assert sorted(r.status_code for r in answers) == [200, 400, 400, 400], [r.text for r in answers]


async def test_expired_oauth_records_in_the_shared_values_are_pruned(make_memory, postgres_section, pg_dsn):
    """What a fleet's OAuth keeps in the store does not pile up (registration is open to anyone): a record put
    longer ago than its kind lives (a waiting approval 10 minutes, a code 5, a client never approved a day) goes at
    the next put, an answered one (emptied) at once; live records and the store's other values stay."""
    from pps_http.oauth import SharedRecords

    from pps_core.contracts import JobClaims, SharedValues

    section = postgres_section("oauthprune")
    memory = await make_memory("oauthprune", plugins=["postgres"], postgres=section)
    store = memory.find(SharedValues)[0]
    records = SharedRecords(store, memory.find(JobClaims)[0])
    far = 4102444800  # (2100: the records' own expiry is not what is tested)
    await records.put("pending", "old", {"expires_at": far})
    await records.put("codes", "old", {"expires_at": far})
    await records.register("never-approved", {"client_name": "x"})
    await records.put("codes", "used", {"expires_at": far})
    assert await records.take("codes", "used") is not None
    assert await records.take("codes", "used") is None  # once
    await store.shared_put("another-value", "kept")
    table = f'"{section["schema"]}".shared_values'
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # as if put a day and a minute ago
        conn.execute(f"UPDATE {table} SET updated_at = now() - interval '1 day 1 minute'")
    records._pruned = 0.0  # (at most one prune a minute per server)
    await records.put("access", "live", {"expires_at": far})

    with psycopg.connect(pg_dsn) as conn:
        keys = {key for (key,) in conn.execute(f"SELECT key FROM {table}")}
    assert "another-value" in keys and "oauth:access:live" in keys
    assert not keys & {"oauth:pending:old", "oauth:codes:old", "oauth:codes:used", "oauth:client-new:never-approved"}
    await memory.close()

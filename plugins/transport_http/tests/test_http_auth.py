"""Auth and ownership: a token opens one entity only; a wrong or missing one writes nothing; one owner."""

from __future__ import annotations

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pps_http.security import EntityAuth

from pps_core import Memory
from pps_core.errors import Forbidden, OwnershipError, Unauthorized


def crystals(server, entity: str) -> list[str]:
    answer = server.call("crystal_list", entity=entity, token_of=entity)
    assert answer.status_code == 200, answer.text
    return answer.json()["current"]


def test_missing_or_wrong_token_is_refused_and_writes_nothing(server):
    before = crystals(server, "lyra")
    missing = server.call("crystallize", {"content": "intruder"}, token_of=None)
    wrong = server.call("crystallize", {"content": "intruder"}, token_of=None,
                        headers={"Authorization": "Bearer not-the-token"})
    basic = server.call("crystallize", {"content": "intruder"}, token_of=None,
                        headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert missing.json()["error"] == "unauthorized"
    assert wrong.status_code == 401 and wrong.json()["error"] == "unauthorized"  # invalid_token (RFC 6750)
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert basic.status_code == 401
    listing = httpx.get(f"{server.url}/tools")
    assert listing.status_code == 401
    assert crystals(server, "lyra") == before
    assert server.token("lyra") not in (server.root / "server.log").read_text()


def test_a_token_never_opens_another_entity(server):
    before = crystals(server, "nexus")
    for path in ("/entities/nexus/tools/crystallize", "/entities/nexus/tools/get_crystals"):
        answer = httpx.post(f"{server.url}{path}", json={"content": "from lyra"}, headers=server.auth("lyra"))
        assert answer.status_code == 401, answer.text  # not nexus's token: invalid for nexus
    primary = httpx.post(f"{server.url}/tools/crystallize", json={"content": "from nexus"},
                         headers=server.auth("nexus"))
    assert primary.status_code == 401  # the bare routes are lyra's
    mcp = httpx.post(f"{server.url}/entities/nexus/mcp", headers={**server.auth("lyra"),
                     "Accept": "application/json, text/event-stream"},
                     json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert mcp.status_code == 401
    assert crystals(server, "nexus") == before
    ok = server.call("crystallize", {"content": "nexus's own"}, entity="nexus", token_of="nexus")
    assert ok.status_code == 200 and crystals(server, "nexus") == before + [ok.json()["created"]]


async def test_mcp_over_http_needs_the_entitys_token(server):
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer wrong"}, timeout=10)
    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 403 as a connection error
        async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
            await client.list_tools()
    listing = httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={"Accept": "application/json, text/event-stream"})
    assert listing.status_code == 401


def test_request_body_over_the_limit_is_413(server):
    before = crystals(server, "lyra")
    answer = server.call("crystallize", {"content": "x" * 5000})  # lyra: max_request_bytes = 4096
    assert answer.status_code == 413 and answer.json()["error"] == "too_large"
    chunked = httpx.post(f"{server.url}/tools/crystallize", headers=server.auth(),
                         content=iter([b'{"content": "', b"y" * 5000, b'"}']))
    assert chunked.status_code == 413
    assert crystals(server, "lyra") == before


def test_regenerate_token_over_http_with_the_current_token(server):
    old = server.token("orion")
    rotated = server.call("pps_regenerate_token", entity="orion", token_of="orion")
    assert rotated.status_code == 200 and old not in rotated.text
    new = server.token("orion")
    assert new != old
    refused = server.call("crystal_list", entity="orion", token_of=None, headers={"Authorization": f"Bearer {old}"})
    assert refused.status_code == 401
    assert server.call("crystal_list", entity="orion", token_of="orion").status_code == 200


async def test_a_second_owner_is_refused_naming_pid_and_address(server):
    memory = Memory.for_entity("lyra", home=server.root / "lyra")
    with pytest.raises(OwnershipError) as caught:
        await memory.open()
    message = caught.value.message
    assert f"pid {server.proc.pid}" in message and f"{server.url}/entities/lyra" in message
    assert caught.value.status == 409


def test_entity_auth_rules(tmp_path):
    from pps_core.auth import write_token

    bare = EntityAuth("bare", tmp_path / "bare")
    bare.check(None)  # no token configured: open on loopback ...
    bare.check(None, origin="http://127.0.0.1:3000", host="127.0.0.1:3000", port=3000)  # ... this server's page
    with pytest.raises(Forbidden, match="requests from web pages"):
        bare.check(None, origin="http://127.0.0.1:3000", host="127.0.0.1:8765", port=8765)  # not another port's
    bare.check(None, origin="http://localhost:3000")  # port unknown to the caller: any port, exact names only
    for lookalike in ("http://127.0.0.1.nip.io", "http://127.1", "http://127.attacker.example"):
        with pytest.raises(Forbidden, match="requests from web pages"):
            bare.check(None, origin=lookalike)
    with pytest.raises(Forbidden, match="requests from web pages"):
        bare.check(None, origin="https://evil.example")  # ... but not a page from elsewhere (CSRF)
    with pytest.raises(Forbidden):
        bare.check(None, sensitive=True)  # ... and never for token rotation
    token = write_token(tmp_path / "locked")
    locked = EntityAuth("locked", tmp_path / "locked")
    with pytest.raises(Unauthorized):
        locked.check(None)
    with pytest.raises(Unauthorized):  # a wrong token: 401 invalid_token
        locked.check("Bearer " + token[:-1])
    locked.check("Bearer " + token, sensitive=True)
    (tmp_path / "locked" / "token").unlink()
    with pytest.raises(Unauthorized):
        locked.check("Bearer " + token)  # a server that started with a token never drops auth

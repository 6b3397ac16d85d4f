"""The explorer's gate over real HTTP: login, sessions, CSRF on every form, headers, the tokenless-entity rules."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import httpx
from pps_explorer.session import CSP


def _login(srv, entity="lyra") -> httpx.Client:
    client = httpx.Client(base_url=f"{srv.url}/ui/{entity}", timeout=30)
    page = client.get("/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', page.text).group(1)
    answer = client.post("/login", data={"nonce": nonce, "token": srv.token(entity)})
    assert answer.status_code == 303 and answer.headers["location"] == f"/ui/{entity}/"
    cookie = next(h for h in answer.headers.get_list("set-cookie") if h.startswith("pps_ui_session="))
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and f"Path=/ui/{entity}" in cookie
    assert srv.token(entity) not in cookie
    return client


def _csrf(html: str) -> str:
    return re.search(r'name="csrf-token" content="([^"]+)"', html).group(1)


def test_pages_need_the_token(explorer_server):
    base = f"{explorer_server.url}/ui/lyra"
    answer = httpx.get(f"{base}/timeline")
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/lyra/login"
    assert httpx.get(f"{base}/timeline", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.post(f"{base}/photos/new", data={"title": "x", "content": "y"}).status_code == 401
    assert httpx.get(f"{base}/", headers=explorer_server.headers("orion")).status_code == 401  # another's token


def test_a_wrong_token_is_refused_and_a_stale_login_form_too(explorer_server):
    client = httpx.Client(base_url=f"{explorer_server.url}/ui/lyra", timeout=30)
    nonce = re.search(r'name="nonce" value="([^"]+)"', client.get("/login").text).group(1)
    wrong = client.post("/login", data={"nonce": nonce, "token": "not-the-token"})
    assert wrong.status_code == 401 and "does not grant access" in wrong.text
    client.cookies.clear()
    stale = client.post("/login", data={"nonce": nonce, "token": explorer_server.token("lyra")})
    assert stale.status_code == 401 and "pps_ui_session" not in stale.headers.get("set-cookie", "")


def test_every_form_needs_the_sessions_csrf_token(explorer_server):
    client = _login(explorer_server)
    home = client.get("/")
    assert home.status_code == 200 and "memory at a glance" in home.text
    token = _csrf(home.text)
    for path, data in (("/photos/new", {"title": "Nope", "content": "x"}),
                       (f"/graph/facts/{explorer_server.seeded['facts'][1]['uuid']}/delete", {}),
                       ("/photos/first-snow.md/delete", {}), ("/logout", {})):
        missing = client.post(path, data=data)
        wrong = client.post(path, data={**data, "csrf": token[:-2] + "xx"})
        assert missing.status_code == wrong.status_code == 403, path
        assert "CSRF" in missing.text
    assert client.get("/photos/first-snow.md").status_code == 200  # nothing was deleted
    facts = client.get("/graph?entity=Jeff").text
    assert explorer_server.seeded["facts"][1]["uuid"] in facts
    made = client.post("/photos/new", data={"title": "Made with CSRF", "content": "fine", "csrf": token})
    assert made.status_code == 303 and made.headers["location"] == "/ui/lyra/photos/made-with-csrf.md"
    out = client.post("/logout", data={"csrf": token})
    assert out.status_code == 303 and client.get("/").status_code == 303  # the session is gone


def _authorize(srv, entity="lyra", name="a connector") -> tuple[str, str]:
    """An OAuth client registered and sent to the entity's authorization endpoint: (the waiting request's id, the
    client's redirect URI)."""
    redirect = "http://127.0.0.1:1/callback"
    client = httpx.post(f"{srv.url}/entities/{entity}/oauth/register",
                        json={"redirect_uris": [redirect], "client_name": name}).json()
    answer = httpx.get(f"{srv.url}/entities/{entity}/oauth/authorize", params={
        "response_type": "code", "client_id": client["client_id"], "redirect_uri": redirect, "state": "s",
        "code_challenge": "x" * 43, "code_challenge_method": "S256"})
    assert answer.status_code == 302, answer.text
    token_page = httpx.get(answer.headers["location"])
    link = re.search(r'href="(/ui/[^"]+/connect\?request=[^"]+)"', token_page.text)
    assert link, token_page.text  # the token page offers the explorer's login
    return link.group(1).split("=", 1)[1], redirect


def test_oauth_approval_with_the_explorer_login_needs_the_session_and_its_csrf(explorer_server):
    request, redirect = _authorize(explorer_server)
    base = f"{explorer_server.url}/ui/lyra"
    anonymous = httpx.get(f"{base}/connect", params={"request": request})
    assert anonymous.status_code == 303  # to the login, which comes back here
    assert anonymous.headers["location"] == f"/ui/lyra/login?next=%2Fui%2Flyra%2Fconnect%3Frequest%3D{request}"
    assert httpx.post(f"{base}/connect", data={"request": request, "decision": "approve"}).status_code == 401
    client = httpx.Client(base_url=base, timeout=30)
    login = client.get(anonymous.headers["location"].removeprefix("/ui/lyra"))
    nonce = re.search(r'name="nonce" value="([^"]+)"', login.text).group(1)
    assert f'name="next" value="/ui/lyra/connect?request={request}"' in login.text
    back = client.post("/login", data={"nonce": nonce, "token": explorer_server.token("lyra"),
                                       "next": f"/ui/lyra/connect?request={request}"})
    assert back.status_code == 303 and back.headers["location"] == f"/ui/lyra/connect?request={request}"
    shown = client.get(back.headers["location"].removeprefix("/ui/lyra"))
    assert shown.status_code == 200 and "a connector" in shown.text and redirect in shown.text
    csp = shown.headers["content-security-policy"]
    assert "form-action 'self' http://127.0.0.1:1" in csp and "script-src 'self'" in csp
    for forged in ({}, {"csrf": _csrf(shown.text)[:-2] + "xx"}):  # another site's form: refused, nothing granted
        refused = client.post("/connect", data={"request": request, "decision": "approve", **forged})
        assert refused.status_code == 403 and "location" not in refused.headers
    denied = client.post("/connect", data={"request": request, "decision": "deny", "csrf": _csrf(shown.text)})
    assert denied.status_code == 303 and denied.headers["location"].startswith(f"{redirect}?error=access_denied")
    gone = client.post("/connect", data={"request": request, "decision": "approve", "csrf": _csrf(shown.text)})
    assert gone.status_code == 400 and "unknown or expired" in gone.text  # a request is answered once


def test_the_login_goes_back_only_to_the_explorers_own_pages(explorer_server):
    client = httpx.Client(base_url=f"{explorer_server.url}/ui/lyra", timeout=30)
    for next_ in ("https://evil.example/", "//evil.example/ui/lyra/", "/ui/lyra/../../entities/lyra/oauth",
                  "/ui/orion/", "/ui/lyra\\@evil.example"):
        nonce = re.search(r'name="nonce" value="([^"]+)"', client.get("/login").text).group(1)
        answer = client.post("/login", data={"nonce": nonce, "token": explorer_server.token("lyra"), "next": next_})
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/lyra/", next_


def test_a_rotated_token_ends_the_session(explorer_server, tmp_path):
    client = _login(explorer_server, "orion")
    assert client.get("/").status_code == 200
    path = Path(explorer_server.root) / "orion" / "token"
    old = path.read_text()
    try:
        path.write_text("a-new-token-for-orion\n")
        assert client.get("/").status_code == 303
    finally:
        path.write_text(old)


def test_headers_forbid_inline_script_and_framing(ui):
    page = ui.get("/timeline")
    assert page.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    assert page.headers["x-frame-options"] == "DENY" and page.headers["x-content-type-options"] == "nosniff"
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text)  # every script is a file of the package


def test_vendored_htmx_is_the_published_file(ui):
    body = ui.get("/static/htmx.min.js")
    assert body.status_code == 200 and body.headers["content-type"].startswith("text/javascript")
    assert hashlib.sha256(body.content).hexdigest() == "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"
    assert ui.get("/static/..%2Fsession.py").status_code == 404
    assert ui.get("/static/session.py").status_code == 404


def test_stored_markup_is_escaped_in_every_page(ui, explorer_server):
    for path in ("/timeline?day=2026-03-03", "/timeline?q=tea", "/crystals", "/photos/hostile.md", "/startup",
                 "/summaries", "/forget"):
        html = ui.get(path).text
        assert "<script>alert" not in html and "<img src=x" not in html and 'href="javascript:' not in html, path
    html = ui.get("/timeline?day=2026-03-03").text
    assert "&lt;script&gt;window.__pwned=1" in html and "Mallory&lt;b&gt;" in html


def test_a_page_whose_operations_are_missing_says_so(explorer_server):
    with httpx.Client(base_url=f"{explorer_server.url}/ui/orion", headers=explorer_server.headers("orion")) as c:
        for path, missing in (("/timeline", "list_turns"), ("/photos", "anchor_list"), ("/graph", "texture_explore"),
                              ("/summaries", "get_recent_summaries"), ("/plots", "turn_activity")):
            page = c.get(path)
            assert page.status_code == 200 and f"does not load the operation {missing}" in page.text, path
        assert "not available" in c.get("/forget").text
        assert c.get("/crystals").status_code == 200


def test_an_entity_without_a_token_answers_only_on_loopback(explorer_server):
    base = f"{explorer_server.url}/ui/nova"
    page = httpx.get(f"{base}/")
    assert page.status_code == 200 and "Log out" not in page.text
    cookie = page.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    rebound = httpx.get(f"{base}/", headers={"Host": "evil.example:80"})
    assert rebound.status_code == 403 and "not this server&#39;s loopback address" in rebound.text
    other_port = httpx.get(f"{base}/", headers={"Origin": "http://127.0.0.1:1"})  # another local app's page
    assert other_port.status_code == 403
    for path in ("/logout", "/forget/confirm", "/photos/new"):
        foreign = httpx.post(f"{base}{path}", headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and "refused" in foreign.text, path
    with httpx.Client() as client:  # a session for CSRF even without a token
        token = _csrf(client.get(f"{base}/crystals").text)
        assert client.post(f"{base}/forget/confirm", data={"id": "1"}).status_code == 403
        assert client.post(f"{base}/forget/confirm", data={"id": "1", "csrf": token}).status_code == 200


def test_lists_are_paged_not_loaded_whole(ui):
    first = ui.get("/timeline?day=2026-03-02").text
    assert first.count('class="turn') == 38 and "next →" not in first  # one page of 50 holds the day
    page = ui.get("/timeline?day=2026-03-02&offset=30").text
    assert page.count('class="turn') == 8 and "31–38 of 38" in page and "Morning 29" not in page
    assert "Evening 7" in page and 'href="/ui/lyra/timeline?day=2026-03-02"' in page  # back to the first page
    search = ui.get("/timeline?q=harbour").text
    assert search.count('class="turn') == 20 and "next →" in search  # 30 match: a page of 20, then more
    more = ui.get("/timeline?q=harbour&offset=20").text
    assert 1 <= more.count('class="turn') <= 20 and "← newer / previous" in more


def test_an_unknown_page_is_a_404_with_the_same_headers(ui):
    missing = ui.get("/no/such/page")
    assert missing.status_code == 404 and "no such page" in missing.text
    assert missing.headers["content-security-policy"] == CSP
    assert ui.post("/timeline").status_code == 405


def test_crystals_show_the_window_and_page_through_the_archive(explorer_server):
    for i in range(16):
        assert explorer_server.call("crystallize", {"content": f"Crystal number {i}"}, entity="orion").status_code == 200
    with httpx.Client(base_url=f"{explorer_server.url}/ui/orion", headers=explorer_server.headers("orion")) as c:
        first = c.get("/crystals").text
        window, archive = first.split("Archive (newest first)")
        assert [f"Crystal number {i}" in window for i in (11, 12, 13, 14, 15)] == [False, True, True, True, True]
        assert archive.count('class="crystal archived"') == 10 and "Crystal number 11" in archive
        assert archive.index("Crystal number 11") < archive.index("Crystal number 10")  # newest first
        rest = c.get("/crystals?offset=10").text.split("Archive (newest first)")[1]
        assert rest.count('class="crystal archived"') == 2 and "Crystal number 0" in rest and "11–12 of 12" in rest

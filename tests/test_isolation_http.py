"""Isolation and auth over a real server hosting two entities: another entity's token is refused on every
route and writes nothing; tokens never appear in logs or answers; every file is 0600 and every folder 0700."""

import json
import os
import stat

import httpx
import pytest

from pps_core.testing.server import init_entity, start_server

PLUGINS = "sqlite,crystals,chroma,embeddings,mcp,http"
SAMPLE = {"store_message": {"content": "secret of B", "author_name": "B", "channel": "c"},
          "store_messages": {"messages": [{"content": "x", "author_name": "B", "channel": "c"}]},
          "crystallize": {"content": "crystal"}, "anchor_save": {"content": "x", "title": "t"},
          "raw_search": {"query": "secret"}, "ambient_recall": {"context": "startup"},
          "store_summary": {"summary_text": "s", "message_ids": [1]}, "anchor_delete": {"filename": "t.md"},
          "poll_channels": {"consumer_key": "k"}}


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    root = tmp_path_factory.mktemp("iso")
    for name in ("alpha", "beta"):
        init_entity(root, name, PLUGINS)
    server = start_server(root, "--entity", "alpha", "--entities", "alpha,beta", "--log-level", "debug")
    server.call("store_message", SAMPLE["store_message"], entity="beta")
    server.call("anchor_save", {"content": "a photo of beta", "title": "beta photo"}, entity="beta")
    yield server
    server.stop()


def counts(server, entity):
    stats = server.call("summary_stats", entity=entity).json()
    crystals = server.call("crystal_list", entity=entity).json()
    photos = server.call("anchor_list", entity=entity).json()
    return stats["total_messages"], len(crystals["current"]), photos["total"]


def test_a_token_for_alpha_is_refused_on_every_route_of_beta(two):
    ops = [t["name"] for t in httpx.get(f"{two.url}/entities/beta/tools", headers=two.headers("beta")).json()["tools"]]
    assert len(ops) > 20
    before = counts(two, "beta")
    for op in ops:
        params = SAMPLE.get(op, {})
        wrong = two.call(op, params, entity="beta", token_of="alpha")
        assert wrong.status_code == 401, (op, wrong.status_code, wrong.text)  # not a token of beta's
        assert "invalid_token" in wrong.headers["WWW-Authenticate"]
        missing = httpx.post(f"{two.url}/entities/beta/tools/{op}", json=params, timeout=30)
        assert missing.status_code == 401, op
    assert httpx.get(f"{two.url}/entities/beta/tools", headers=two.headers("alpha")).status_code == 401
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    mcp = httpx.post(f"{two.url}/entities/beta/mcp", json=init, timeout=30,
                     headers={**two.headers("alpha"), "Accept": "application/json, text/event-stream"})
    assert mcp.status_code == 401
    assert counts(two, "beta") == before  # nothing was written
    # and alpha never sees beta's memories through its own routes
    assert two.call("raw_search", {"query": "secret"}, entity="alpha").json()["count"] == 0
    assert two.call("anchor_list", entity="alpha").json()["total"] == 0


def test_tokens_are_never_logged_or_returned(two):
    tokens = [two.token("alpha"), two.token("beta")]
    seen = []
    for op in ("pps_health", "pps_regenerate_token", "ambient_recall", "anchor_list"):
        r = two.call(op, {"context": "startup"} if op == "ambient_recall" else {}, entity="alpha")
        seen.append(r.text + json.dumps(dict(r.headers)))
        tokens.append(two.token("alpha"))  # rotated: the new one must not leak either
    seen.append(httpx.get(f"{two.url}/openapi.json").text)
    seen.append(two.call("raw_search", {"query": "x"}, entity="beta", token_of="alpha").text)
    log = two.log.read_text()
    assert "POST /entities" in log  # the access log is on, at debug level
    for token in tokens:
        assert token not in log
        assert all(token not in text for text in seen)


def test_every_file_is_0600_and_every_folder_0700(two):
    for name in ("alpha", "beta"):
        home = two.root / name
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        for root, dirs, files in os.walk(home):
            for d in dirs:
                mode = stat.S_IMODE(os.stat(os.path.join(root, d)).st_mode)
                assert mode & 0o077 == 0, (os.path.join(root, d), oct(mode))
            for f in files:
                mode = stat.S_IMODE(os.stat(os.path.join(root, f)).st_mode)
                assert mode & 0o077 == 0, (os.path.join(root, f), oct(mode))

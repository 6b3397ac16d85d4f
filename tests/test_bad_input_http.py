"""Bad input over the wire, property-based: every operation's parameters (from its JSON schema) filled with
hostile values, through HTTP and through MCP. The answer is a clear 4xx / MCP error result or a correct
result, never a 500 or a traceback, and a refused call changes nothing. Then schemathesis against the
server's OpenAPI spec."""

import json
import os
import subprocess
import sys

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pps_core.testing.server import init_entity, start_server

PLUGINS = "sqlite,crystals,chroma,embeddings,mcp,http"
SKIP = {"pps_regenerate_token", "pps_upkeep", "session_recap", "pps_backup"}  # rotate the token / need an LLM /
# read or write host files
HOSTILE_TEXT = st.sampled_from([
    "", " ", "\x00", "a\x00b", '"unbalanced', "NEAR(a b", "a AND OR NOT b", "col:value", "*", "^start", "-", "()",
    "'; DROP TABLE messages; --", "1 OR 1=1", "../../etc/passwd", "..", ".hidden", "/abs/path", "C:\\win\\x",
    "%2e%2e%2f", "😀" * 50, "\u202e\u200b\ufeff", "ǅ\u0301\u0308", "x" * 300_000, "2026-13-45T25:61:00",
    "2026-01-01T00:00:00+25:00", "yesterday", "24h", "-7d", "9999999d", "1e309", "NaN", "null", "{}",
]) | st.text(max_size=40)
HOSTILE = (HOSTILE_TEXT | st.integers(-2**70, 2**70) | st.sampled_from([-1, 0, 10**9, 2**63, -2**63]) | st.none()
           | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.lists(HOSTILE_TEXT, max_size=3)
           | st.dictionaries(st.text(max_size=5), HOSTILE_TEXT, max_size=2))
TRIED = {"http": 0, "mcp": 0}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("badin")
    init_entity(root, "lyra", PLUGINS)
    server = start_server(root, "--entity", "lyra")
    server.call("store_message", {"content": "seed turn", "author_name": "J", "channel": "c"}, entity="lyra")
    server.call("crystallize", {"content": "seed crystal"}, entity="lyra")
    tools = httpx.get(f"{server.url}/entities/lyra/tools", headers=server.headers("lyra")).json()["tools"]
    server.tools = {t["name"]: t["input_schema"] for t in tools if t["name"] not in SKIP}
    yield server
    server.stop()
    assert "Traceback" not in server.log.read_text()
    print(f"\nbad inputs tried: {TRIED}")


def state(server):
    c = server.call
    return (c("summary_stats", entity="lyra").json()["total_messages"],
            c("summary_stats", entity="lyra").json()["summary_count"],
            tuple(c("crystal_list", entity="lyra").json()["current"]), c("anchor_list", entity="lyra").json()["total"])


@st.composite
def calls(draw, tools):
    name = draw(st.sampled_from(sorted(tools)))
    props = list(tools[name].get("properties") or {})
    keys = draw(st.lists(st.sampled_from(props + ["not_a_param"]), max_size=4, unique=True))
    return name, {k: draw(HOSTILE) for k in keys}


def check_answer(status: int, text: str) -> None:
    assert status < 500, text[:500]
    assert "Traceback" not in text and 'File "/' not in text


def test_hostile_parameters_over_http(srv):
    @settings(max_examples=int(os.environ.get("PPS_BAD_INPUT_EXAMPLES", 150)), deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(calls(srv.tools))
    def run(call):
        name, params = call
        before = state(srv)
        r = srv.call(name, params, entity="lyra")
        TRIED["http"] += 1
        check_answer(r.status_code, r.text)
        if r.status_code >= 400:
            assert r.json()["error"] and r.json()["message"]
            assert state(srv) == before, (name, params)

    run()


def test_non_finite_numbers_and_bodies_that_are_not_objects(srv):
    for raw in ('{"limit": NaN, "query": "x"}', '{"limit": Infinity, "query": "x"}', '[1, 2]', 'null', '"text"',
                '{"query": "x", "limit": 1e999}', '{bad json'):
        r = httpx.post(f"{srv.url}/entities/lyra/tools/raw_search", content=raw, timeout=30,
                       headers={**srv.headers("lyra"), "Content-Type": "application/json"})
        TRIED["http"] += 1
        assert r.status_code == 422, (raw, r.text)


def mcp_session(srv):
    headers = {**srv.headers("lyra"), "Accept": "application/json, text/event-stream"}
    init = httpx.post(f"{srv.url}/entities/lyra/mcp", headers=headers, timeout=30, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}})
    assert init.status_code == 200, init.text
    headers["mcp-session-id"] = init.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = "2025-06-18"
    httpx.post(f"{srv.url}/entities/lyra/mcp", headers=headers, timeout=30,
               json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


def test_hostile_parameters_over_mcp(srv):
    headers = mcp_session(srv)

    @settings(max_examples=int(os.environ.get("PPS_BAD_INPUT_EXAMPLES", 150)) // 2, deadline=None,
              derandomize=True, suppress_health_check=list(HealthCheck))
    @given(calls(srv.tools))
    def run(call):
        name, params = call
        before = state(srv)
        r = httpx.post(f"{srv.url}/entities/lyra/mcp", headers=headers, timeout=60, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": params}})
        TRIED["mcp"] += 1
        check_answer(r.status_code, r.text)
        if r.status_code == 413:
            return
        answer = r.json()
        assert "result" in answer or answer["error"]["code"] != -32603, answer  # never an internal error
        if answer.get("result", {}).get("isError") or "error" in answer:
            assert state(srv) == before, (name, params)

    run()


def test_schemathesis_against_the_openapi_spec(srv, tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    out = subprocess.run(
        [exe, "run", f"{srv.url}/openapi.json", "-H", f"Authorization: Bearer {srv.token('lyra')}",
         "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                     "response_schema_conformance",
         "--include-path-regex", "^/tools/", "--exclude-path-regex", "|".join(sorted(SKIP)),
         "-n", os.environ.get("PPS_SCHEMATHESIS_EXAMPLES", "12"), "--seed", "8", "--no-shrink", "-w", "2",
         "--request-timeout", "60", "--report", "json", "--report-json-path", str(tmp_path / "st.json")],
        capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-6000:]
    report = json.loads((tmp_path / "st.json").read_text()) if (tmp_path / "st.json").exists() else {}
    print("\nschemathesis:", out.stdout.strip().splitlines()[-1], json.dumps(report)[:300])


EDGE_TIMES = ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "9998-12-31T23:30:00-12:00", "0001-01-01"]
MINIMAL = {"store_messages": {"messages": [{"content": "m", "author_name": "A", "channel": "c"}]},
           "forget_turns": {"ids": [987654]}, "forget_search": {"query": "zzzqqq"},
           "forget_range": {"channel": "nowhere", "since": "2020-01-01T00:00:00Z", "until": "2020-01-02T00:00:00Z"},
           "get_turns_since": {"timestamp": "2026-01-01T00:00:00Z"},
           "get_turns_around": {"timestamp": "2026-01-01T00:00:00Z"}, "get_conversation_context": {"turns": 3},
           "anchor_save": {"content": "a word-photo", "title": "fuzz"}, "pps_backup": {"path": "fuzz-read.tar.gz"},
           "poll_channels": {"consumer_key": "fuzz"}, "anchor_get": {"filename": "none.md"}}
PLACEHOLDER = {"string": "seed", "integer": 1, "number": 1.0, "boolean": False, "array": [], "object": {}}


def _kind(spec):
    return spec.get("type") or next((a.get("type") for a in spec.get("anyOf", []) if a.get("type") != "null"), None)


def _minimal(name, schema):
    if name in MINIMAL:
        return dict(MINIMAL[name])
    return {k: PLACEHOLDER.get(_kind(schema["properties"][k])) for k in schema.get("required", [])}


def _nested(depth, leaf=None):
    value = leaf if leaf is not None else {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_deep_nesting_and_calendar_edges_on_every_operation_then_every_read(srv):
    """Issue 14 items 1-2 over the wire: every operation refuses deep JSON (in a parameter and as the whole
    body) with a 4xx and writes nothing; a time at the calendar's edge in any text parameter is refused or
    stored renderable; then every read operation answers 200 with valid minimal parameters."""
    listing = httpx.get(f"{srv.url}/entities/lyra/tools", headers=srv.headers("lyra"), timeout=30).json()["tools"]
    ops = {t["name"]: t for t in listing if t["name"] != "pps_regenerate_token"}
    client = httpx.Client(timeout=60)
    before = state(srv)
    for name, tool in sorted(ops.items()):
        schema = tool["input_schema"]
        base = _minimal(name, schema)
        r = client.post(f"{srv.url}/entities/lyra/tools/{name}", content="[" * 5000 + "]" * 5000,
                       headers={**srv.headers("lyra"), "Content-Type": "application/json"})
        assert r.status_code == 422, (name, r.status_code, r.text[:300])
        for prop in [*list(schema.get("properties") or {})[:2], "metadata"]:  # every one: test_bad_input.py
            r = srv.call(name, {**base, prop: _nested(40)}, entity="lyra", client=client)
            TRIED["http"] += 1
            assert r.status_code == 422 and "nest" in r.json()["message"], (name, prop, r.status_code, r.text[:300])
    assert state(srv) == before

    for name, tool in sorted(ops.items()):
        if name == "pps_backup":  # a time as an archive name is only a file name
            continue
        schema = tool["input_schema"]
        base = _minimal(name, schema)
        for prop, spec in (schema.get("properties") or {}).items():
            if _kind(spec) != "string":
                continue
            for edge in EDGE_TIMES:
                r = srv.call(name, {**base, prop: edge}, entity="lyra", timeout=60, client=client)
                TRIED["http"] += 1
                check_answer(r.status_code, r.text)
    r = srv.call("store_messages", {"messages": [{"content": "edge", "author_name": "A", "channel": "c",
                                                  "created_at": e} for e in EDGE_TIMES]}, entity="lyra")
    check_answer(r.status_code, r.text)

    reads = sorted(n for n, t in ops.items() if t["read_only"] and n not in ("session_recap",))
    assert {"ambient_recall", "raw_search", "list_turns", "pps_backup", "anchor_search"} <= set(reads)
    for name in reads:
        params = _minimal(name, ops[name]["input_schema"])
        r = srv.call(name, params, entity="lyra", timeout=120)
        TRIED["http"] += 1
        expected = 404 if name == "anchor_get" else 200  # no such word-photo: a clean 404
        assert r.status_code == expected, (name, params, r.status_code, r.text[:500])
    client.close()


@pytest.mark.parametrize(("op", "params", "param"), [
    ("store_message", {"content": "ok", "author_name": "J", "channel": "c", "metadata": {"k": "\ud800"}}, "metadata.k"),
    ("store_message", {"content": "ok", "author_name": "J", "channel": "c", "metadata": {"\udfff": 1}}, "metadata"),
    ("store_message", {"content": "ok", "author_name": "J", "channel": "c", "metadata": {"a": ["x", "\ud800"]}},
     "metadata.a.1"),
    ("forget_turns", {"ids": [2**63]}, "ids.0"),
    ("list_turns", {"ids": [2**63 + 5]}, "ids.0"),
    ("get_conversation_context", {"turns": -(2**63) - 1}, "turns"),
])
def test_values_no_store_can_keep_are_a_4xx_naming_the_parameter(srv, op, params, param):
    """Issue 22 item 12: a lone surrogate in metadata and ids past 64 bits were 500s (UnicodeEncodeError,
    OverflowError)."""
    before = state(srv)
    body = json.dumps(params).encode()  # ASCII JSON: a lone surrogate travels as \\ud800, as any client sends it
    answer = httpx.post(f"{srv.url}/entities/lyra/tools/{op}", content=body,
                        headers={**srv.headers("lyra"), "Content-Type": "application/json"}, timeout=30)
    assert answer.status_code == 422, answer.text
    assert answer.json()["param"] == param
    assert state(srv) == before

"""Bytes no file name can hold, in every string parameter of the catalog, over real HTTP (issue 35 item 8).

``session_recap {"log": "x\\u0000.jsonl"}`` answered 500 (the path reached ``Path.resolve``, which raises
ValueError for a NUL); the fuzz suites skip ``session_recap`` and ``pps_backup`` because they read and write
host files, so this sweep sends only values no file system accepts (a NUL, a lone surrogate) to every string
parameter, those two operations included: a 4xx, or a correct answer, never a 500.
"""

from __future__ import annotations

import json

import httpx
import pytest

from pps_core.testing.server import init_entity, start_server

PLUGINS = "sqlite,crystals,chroma,embeddings,recap,http"
#: A NUL (no path may hold one), a lone surrogate (no UTF-8 file name holds one; JSON clients send it escaped).
VALUES = ("x\x00.jsonl", "a\x00b.tar.gz", "x\ud800.jsonl", "/tmp/\udcff.tar.gz")
SKIP = {"pps_regenerate_token"}  # rotates the token this client holds


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("bytes")
    init_entity(root, "lyra", PLUGINS)
    server = start_server(root, "--entity", "lyra")
    yield server
    server.stop()


def post(srv, op: str, params: dict) -> httpx.Response:
    body = json.dumps(params).encode()  # ASCII JSON: a lone surrogate travels as \\ud800, as any client sends it
    return httpx.post(f"{srv.url}/tools/{op}", content=body,
                      headers={**srv.headers(), "Content-Type": "application/json"}, timeout=60)


@pytest.mark.parametrize("value", ["x\x00.jsonl", "/tmp/x\x00.jsonl", "\x00"])
def test_a_nul_in_the_recap_log_is_a_4xx_naming_it(srv, value):
    answer = post(srv, "session_recap", {"log": value})
    assert answer.status_code == 422, answer.text
    assert answer.json()["param"] == "log"


def _strings(schema: dict) -> list[str]:
    def is_string(prop: dict) -> bool:
        return prop.get("type") == "string" or any(a.get("type") == "string" for a in prop.get("anyOf", []))

    return [name for name, prop in (schema.get("properties") or {}).items() if is_string(prop)]


def _filler(prop: dict):
    kinds = {prop.get("type")} | {a.get("type") for a in prop.get("anyOf", [])}
    return "hello" if "string" in kinds else [] if "array" in kinds else 1


def test_no_string_parameter_lets_unencodable_bytes_reach_the_os(srv):
    tools = httpx.get(f"{srv.url}/tools", headers=srv.headers(), timeout=30).json()["tools"]
    failures, tried = [], 0
    for tool in tools:
        if tool["name"] in SKIP:
            continue
        schema = tool["input_schema"]
        for param in _strings(schema):
            for value in VALUES:
                params = {name: _filler(schema["properties"][name]) for name in schema.get("required", [])}
                params[param] = value
                answer = post(srv, tool["name"], params)
                tried += 1
                if answer.status_code >= 500:
                    failures.append(f"{tool['name']}.{param}={value!r}: {answer.status_code} {answer.text[:200]}")
    assert tried > 50
    assert failures == []
    assert "Traceback" not in srv.log.read_text()

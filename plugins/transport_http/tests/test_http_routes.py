"""One catalog, every transport: the REST routes, the OpenAPI docs and the MCP tools are the same set."""

from __future__ import annotations

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def mcp_client(server, path: str = "/mcp", entity: str = "lyra") -> Client:
    http = httpx2.AsyncClient(headers=server.auth(entity), timeout=10)
    return Client(streamable_http_client(f"{server.url}{path}", http_client=http))


def _resolve(openapi: dict, schema: dict) -> dict:
    name = schema["$ref"].rsplit("/", 1)[1]
    return openapi["components"]["schemas"][name]


async def test_catalog_routes_and_mcp_tools_are_one_set(server):
    catalog = httpx.get(f"{server.url}/tools", headers=server.auth()).json()["tools"]
    openapi = httpx.get(f"{server.url}/openapi.json", headers=server.auth()).json()
    routes = {p.removeprefix("/tools/"): v["post"] for p, v in openapi["paths"].items()
              if p.startswith("/tools/")}
    async with mcp_client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    names = [spec["name"] for spec in catalog]
    assert set(names) == set(routes) == set(tools)
    assert {"ambient_recall", "raw_search", "crystallize", "pps_health"} <= set(names)
    for spec in catalog:
        tool, route = tools[spec["name"]], routes[spec["name"]]
        assert tool.description == spec["description"] == route["description"]
        assert tool.input_schema == spec["input_schema"]
        body = _resolve(openapi, route["requestBody"]["content"]["application/json"]["schema"])
        if "$defs" not in spec["input_schema"]:
            assert body == spec["input_schema"]
        hints = tool.annotations
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
            spec["read_only"], spec["destructive"], spec["idempotent"])


async def test_each_entity_has_its_own_plugin_set(server):
    for entity in ("lyra", "nexus"):
        openapi = httpx.get(f"{server.url}/openapi.json", headers=server.auth(entity)).json()
        catalog = {s["name"] for s in httpx.get(f"{server.url}/entities/{entity}/tools",
                                                headers=server.auth(entity)).json()["tools"]}
        prefix = f"/entities/{entity}/tools/"
        routes = {p.removeprefix(prefix) for p in openapi["paths"] if p.startswith(prefix)}
        async with mcp_client(server, f"/entities/{entity}/mcp", entity) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
        assert catalog == routes == tools
    assert "raw_search" not in routes  # nexus loads crystals only


def test_openapi_and_docs_need_a_token_and_show_only_its_entity(server):
    assert httpx.get(f"{server.url}/openapi.json").status_code == 401
    assert httpx.get(f"{server.url}/openapi.json", headers={"Authorization": "Bearer nope"}).status_code in (401, 403)
    shell = httpx.get(f"{server.url}/docs")  # a page without data: it asks for the token, then fetches the document
    assert shell.status_code == 200 and "lyra" not in shell.text and 'name="token"' in shell.text
    assert "cdn" not in shell.text.lower() and "/docs/static/swagger-ui-bundle.js" in shell.text
    bundle = httpx.get(f"{server.url}/docs/static/swagger-ui-bundle.js")
    assert bundle.status_code == 200 and "SwaggerUIBundle" in bundle.text
    assert httpx.get(f"{server.url}/docs/static/..%2Fpps.toml").status_code == 404
    seen = httpx.get(f"{server.url}/openapi.json", headers=server.auth("nexus")).text
    assert "/entities/nexus/tools/crystallize" in seen
    assert "lyra" not in seen and "orion" not in seen


def test_rest_call_json_in_json_out(server):
    saved = server.call("crystallize", {"content": "routes crystal"})
    assert saved.status_code == 200, saved.text
    recall = server.call("ambient_recall", {"context": "startup"})
    assert recall.status_code == 200
    assert "routes crystal" in recall.json()["text"]
    assert httpx.get(f"{server.url}/health").json() == {"ok": True, "entities": 3}
    assert httpx.get(f"{server.url}/docs", headers=server.auth()).status_code == 200


def test_bad_params_are_422_naming_the_parameter(server):
    cases = [
        ({"context": "startup", "limit_per_layer": -1}, "limit_per_layer"),
        ({}, "context"),
        ({"context": "startup", "budget": "lots"}, "budget"),
    ]
    for params, param in cases:
        answer = server.call("ambient_recall", params)
        assert answer.status_code == 422, (params, answer.text)
        body = answer.json()
        assert body["error"] == "invalid_params" and "Traceback" not in answer.text
        if param:
            assert body["param"] == param
    raw = [
        b"{not json", b"[1, 2]", b'"startup"', b'{"context": "startup", "limit_per_layer": NaN}',
    ]
    for content in raw:
        answer = httpx.post(f"{server.url}/tools/ambient_recall", content=content,
                            headers={**server.auth(), "Content-Type": "application/json"})
        assert answer.status_code == 422, (content, answer.text)
        assert answer.json()["error"] == "invalid_params"
    nan = httpx.post(f"{server.url}/tools/raw_search", content=b'{"query": "x", "limit": NaN}',
                     headers={**server.auth(), "Content-Type": "application/json"})
    assert nan.status_code == 422 and nan.json()["param"] == "limit"


async def test_mcp_over_http_calls_and_errors(server):
    async with mcp_client(server) as client:
        saved = await client.call_tool("store_message", {"content": "over streamable http", "author_name": "Jeff",
                                                         "channel": "web"})
        found = await client.call_tool("raw_search", {"query": "streamable"})
        bad = await client.call_tool("raw_search", {"query": "x", "limit": 0, "offset": -5})
        recall = await client.call_tool("ambient_recall", {"context": "startup"})
    assert not saved.is_error, saved.content
    assert "over streamable http" in found.content[0].text
    assert bad.is_error and bad.structured_content["param"] in ("limit", "offset")
    assert "over streamable http" in recall.content[0].text
    assert "text" not in recall.structured_content and "**Clock**" in recall.content[0].text

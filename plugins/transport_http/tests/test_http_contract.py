"""`pps serve http` passes the transport contract twice: REST (POST /tools/<op>) and MCP over streamable HTTP,
two entities in one process (tenancy inside one server)."""

from __future__ import annotations

import httpx
from pps_mcp.testing import McpContractClient

from pps_core.forward import error_from_answer
from pps_core.owner import read_owner
from pps_core.testing import ServedEntity, TransportContract


class RestClient:
    def __init__(self, address: str, token: str | None) -> None:
        self.address = address
        self.http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=30)

    async def _answer(self, response: httpx.Response):
        payload = response.json() if response.content else None
        if response.status_code >= 400:
            raise error_from_answer(response.status_code, payload)
        return payload

    async def tools(self) -> list[str]:
        return [t["name"] for t in (await self._answer(await self.http.get(f"{self.address}/tools")))["tools"]]

    async def call(self, operation: str, params):
        return await self._answer(await self.http.post(f"{self.address}/tools/{operation}", json=params))

    async def close(self) -> None:
        await self.http.aclose()


def _address(entity: ServedEntity) -> str:
    return read_owner(entity.home)["address"]


class TestHttpRestTransport(TransportContract):
    transport = "http"
    serve_args = ["--port", "0"]
    multi_entity = True

    async def connect(self, entity: ServedEntity, token: str | None) -> RestClient:
        return RestClient(_address(entity), token)


class TestHttpMcpTransport(TransportContract):
    transport = "http"
    plugins = ["http", "mcp"]
    serve_args = ["--port", "0"]
    settings = ["[mcp]", 'tools = "all"']  # every operation listed: the contract checks each
    multi_entity = True

    async def connect(self, entity: ServedEntity, token: str | None) -> McpContractClient:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        statuses: list[int] = []

        async def seen(response) -> None:
            statuses.append(response.status_code)

        return McpContractClient(lambda: streamable_http_client(f"{_address(entity)}/mcp", http_client=httpx2.AsyncClient(
            headers=headers, timeout=30, event_hooks={"response": [seen]})), http_statuses=statuses)

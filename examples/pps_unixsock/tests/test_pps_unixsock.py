"""pps-unixsock passes the transport contract every PPS transport passes, over its real socket."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from pps_core.testing import ServedEntity, TransportContract, error_from


class UnixClient:
    def __init__(self, path: str) -> None:
        self.path, self.ids, self.conn = path, itertools.count(1), None

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        if self.conn is None:
            self.conn = await asyncio.open_unix_connection(self.path, limit=2**24)
        reader, writer = self.conn
        writer.write(json.dumps({"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}).encode()
                     + b"\n")
        answer = json.loads(await reader.readline())
        if "error" in answer:
            raise error_from(answer["error"].get("data") or answer["error"])
        return answer["result"]

    async def tools(self) -> list[str]:
        return [t["name"] for t in (await self.request("tools/list", {}))["tools"]]

    async def call(self, operation: str, params: Any) -> Any:
        return await self.request("tools/call", {"name": operation, "arguments": params})

    async def close(self) -> None:
        if self.conn is not None:
            self.conn[1].close()


class TestUnixSocketTransport(TransportContract):
    transport = "unixsock"
    gate = "os"
    multi_entity = True

    async def connect(self, entity: ServedEntity, token: str | None) -> UnixClient:
        return UnixClient(str(entity.home / "pps.sock"))

    def ready(self, entity: ServedEntity) -> bool:
        return (entity.home / "pps.sock").exists()

    def endpoints(self, entity: ServedEntity) -> list:
        return [entity.home / "pps.sock"]

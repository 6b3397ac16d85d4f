"""Where tool calls go: the entity's own Memory, or the HTTP server that owns the entity."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolSpec:
    """What a client sees of one operation; the same fields for MCP tools and ``GET /tools``."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    sensitive: bool = False

    @classmethod
    def from_operation(cls, op) -> ToolSpec:
        return cls(name=op.name, description=op.description, input_schema=op.input_schema(),
                   read_only=op.read_only, destructive=op.destructive, idempotent=op.idempotent,
                   sensitive=op.sensitive)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema,
                "read_only": self.read_only, "destructive": self.destructive, "idempotent": self.idempotent,
                "sensitive": self.sensitive}


class Backend(Protocol):
    async def tools(self) -> list[ToolSpec]: ...

    async def call(self, name: str, params: dict[str, Any] | None) -> Any:
        """Run one operation; raise :class:`pps_core.PPSError` for anything the caller did wrong."""
        ...


class LocalBackend:
    """This process owns the entity: calls go straight to its Memory."""

    def __init__(self, memory) -> None:
        self.memory = memory
        self._specs: tuple[int, list[ToolSpec]] | None = None

    async def tools(self) -> list[ToolSpec]:
        catalog = self.memory.catalog
        if self._specs is None or self._specs[0] != id(catalog):
            self._specs = (id(catalog), [ToolSpec.from_operation(op) for op in catalog])
        return self._specs[1]

    async def call(self, name: str, params: dict[str, Any] | None) -> Any:
        return await self.memory.call(name, params)


class RemoteBackend:
    """An HTTP server owns the entity: every call is forwarded there with the entity's token.

    The token is read from the entity's home on every call, so a rotation is picked up at once.
    """

    def __init__(self, address: str, home: Path) -> None:
        self.address = address.rstrip("/")
        self.home = Path(home)

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        import anyio

        from pps_core.auth import read_token
        from pps_core.errors import Unavailable
        from pps_core.forward import request, server_address

        token = read_token(self.home)
        self.address = (server_address(self.home) or self.address).rstrip("/")  # a restarted server moved
        try:
            return await anyio.to_thread.run_sync(lambda: request(self.address, method, path, token, body))
        except Unavailable:
            if server_address(self.home) is None:
                raise Unavailable(f"the server at {self.address} that owned this entity has stopped: start it "
                                  "again (pps serve http), or restart this MCP server to own the stores") from None
            raise

    async def tools(self) -> list[ToolSpec]:
        answer = await self._request("GET", "/tools")
        return [ToolSpec(**spec) for spec in answer["tools"]]

    async def call(self, name: str, params: dict[str, Any] | None) -> Any:
        from urllib.parse import quote

        return await self._request("POST", f"/tools/{quote(name, safe='')}", params or {})

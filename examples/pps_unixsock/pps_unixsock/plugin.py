"""``pps serve unixsock``: JSON-RPC 2.0, one request per line, on ``<home>/pps.sock``.

For daemons on the same machine (a chat bot, a reflection loop). The gate is the operating system: the socket
file is 0600 in the entity's 0700 home, so only the entity's user can connect, and every caller is trusted as
that user. The kernel has opened the entity (or forwards to its owner) and applies the catalog, its errors and
its limits; this module is only the wire.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from pps_core import PPSError, TooLarge, hookimpl
from pps_core.reach import Caller, Entity
from pps_core.transport import Served, Transport

SOCKET = "pps.sock"


class UnixSocketTransport(Transport):
    name = "unixsock"
    help = "JSON-RPC 2.0 over <home>/pps.sock (0600): tools/list, tools/call {name, arguments}"
    forwards = True
    multi_entity = True

    async def serve(self, served: Served, options: Any) -> None:
        servers = [await _listen(entity) for entity in served]
        try:
            await asyncio.gather(*(s.serve_forever() for s, _ in servers))
        finally:
            for server, conns in servers:
                server.close()
                for task in conns:
                    task.cancel()
                await asyncio.gather(*conns, return_exceptions=True)


async def _listen(entity: Entity) -> tuple[asyncio.Server, set[asyncio.Task[None]]]:
    path = entity.settings.home / SOCKET
    path.unlink(missing_ok=True)
    conns: set[asyncio.Task[None]] = set()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while line := await _line(reader):
                writer.write(json.dumps(await _answer(entity, line), ensure_ascii=False).encode() + b"\n")
                await writer.drain()
        finally:
            conns.discard(asyncio.current_task())  # type: ignore[arg-type]
            writer.close()

    server = await asyncio.start_unix_server(connection, path, limit=entity.max_request_bytes + 1)
    os.chmod(path, 0o600)
    return server, conns


async def _line(reader: asyncio.StreamReader) -> bytes:
    """The next request line; a line over the limit comes back as b"\\x00" (answered TooLarge), EOF as b""."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        return exc.partial
    except asyncio.LimitOverrunError as exc:
        while True:  # skip the rest of it, keep the connection
            await reader.readexactly(exc.consumed)
            try:
                await reader.readuntil(b"\n")
                return b"\x00"
            except asyncio.LimitOverrunError as more:
                exc = more


async def _answer(entity: Entity, line: bytes) -> dict[str, Any]:
    rid = None
    try:
        if line == b"\x00":
            raise TooLarge(f"request over {entity.max_request_bytes} bytes (limits.max_request_bytes)")
        try:
            request = json.loads(line)
            rid, method, params = request.get("id"), request["method"], request.get("params") or {}
        except (ValueError, KeyError, AttributeError):
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "not a JSON-RPC request"}}
        caller = Caller.trusted("unixsock")  # the socket's 0600 is the gate
        if method == "tools/list":
            entity.admit(caller)
            result: Any = {"tools": [spec.to_dict() for spec in await entity.tools()]}
        elif method == "tools/call":
            result = await entity.call(params.get("name", ""), params.get("arguments"), caller=caller, size=len(line))
        else:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method!r}"}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}
    except PPSError as exc:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": exc.message, "data": exc.to_dict()}}


@hookimpl
def pps_transports() -> list[Transport]:
    return [UnixSocketTransport()]

"""`pps serve mcp` (stdio) passes the transport contract: the first client's process owns the entity and answers
the forwarding protocol on loopback (the HTTP transport's listener, run by the kernel); later ones forward there."""

from __future__ import annotations

import sys

from pps_mcp.testing import McpContractClient

from pps_core.testing import ServedEntity, TransportContract
from pps_core.testing.server import pps_env


class TestMcpStdioTransport(TransportContract):
    transport = "mcp"
    plugins = ["mcp", "http"]
    gate = "pipe"
    server = False
    settings = ["[mcp]", 'tools = "all"']  # every operation listed: the contract checks each

    async def connect(self, entity: ServedEntity, token: str | None) -> McpContractClient:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=sys.executable, env=pps_env(entity.root),
                                       args=["-m", "pps_core.cli", "serve", "mcp", "--entity", entity.name])
        log = open(entity.root / f"stdio-{entity.name}.log", "a")  # noqa: SIM115 - the server's stderr, kept open
        return McpContractClient(lambda: stdio_client(params, errlog=log))

"""Entry point of the MCP transport: ``pps serve mcp``."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_transports():
    from .stdio import McpTransport

    return [McpTransport()]

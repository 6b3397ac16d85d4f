"""Entry point of the MCP transport: ``pps serve mcp``."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 80


@hookimpl
def pps_transports():
    from .stdio import McpTransport

    return [McpTransport()]

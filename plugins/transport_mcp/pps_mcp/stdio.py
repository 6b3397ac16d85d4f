"""``pps serve mcp``: MCP over stdio. Owns the entity's stores, or forwards to the server that does.

Nothing but protocol frames reaches stdout: logs go to stderr, and the SDK points fd 1 at stderr
while it serves, so a stray print from a plugin cannot corrupt the stream.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("pps.mcp")


def configure_logging(level: str = "WARNING") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def serve_stdio(settings, *, forward: bool = True) -> None:
    from mcp.server.stdio import stdio_server

    from pps_core.forward import server_address
    from pps_core.memory import Memory

    from .backend import RemoteBackend
    from .server import create_server

    async with stdio_server() as (read_stream, write_stream):
        address = server_address(settings.home) if forward else None
        if address:
            log.info("entity %s is served at %s: forwarding every tool call there", settings.entity, address)
            server = create_server(backend=RemoteBackend(address, settings.home), name=f"pps-{settings.entity}")
            await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        async with Memory(settings) as memory:
            server = create_server(memory)
            await server.run(read_stream, write_stream, server.create_initialization_options())


class McpTransport:
    name = "mcp"
    help = ("MCP over stdio for one entity (Claude Code, Claude Desktop). Forwards to the entity's "
            "HTTP server when one runs; otherwise owns the stores itself.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--local", action="store_true",
                            help="never forward: own the stores (fails if a server owns them)")
        parser.add_argument("--log-level", default="WARNING", help="log level (logs go to stderr)")

    def serve(self, args) -> int:
        import anyio

        from pps_core.errors import PPSError
        from pps_core.settings import load_settings

        configure_logging(args.log_level)
        try:
            settings = load_settings(args.entity, args.home)
            anyio.run(lambda: serve_stdio(settings, forward=not args.local))
        except KeyboardInterrupt:
            return 130
        except BaseException as exc:
            err = _pps_error(exc, PPSError)
            if err is None:
                raise
            print(f"pps serve mcp: error: {err.message}", file=sys.stderr)
            return 2
        return 0


def _pps_error(exc: BaseException, cls):
    """The PPSError inside ``exc`` (task groups wrap what a task raised), or None."""
    if isinstance(exc, cls):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _pps_error(inner, cls)
        if found is not None:
            return found
    return None

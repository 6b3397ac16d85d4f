"""``pps serve http``: REST + MCP over streamable HTTP for one or several entities, on loopback by default.

The kernel has opened the entities (``pps_core.serving``) and answers other processes on its own local channel;
this module binds, runs uvicorn on the app and publishes the address in each entity's owner lock once the socket
accepts (shown by ``pps doctor``).
"""

from __future__ import annotations

import asyncio
import socket
import sys

from pps_core.errors import PPSError
from pps_core.transport import Served, Transport

from .security import is_loopback


class HttpTransport(Transport):
    name = "http"
    help = ("REST (POST /tools/<operation>) and MCP over streamable HTTP (/mcp) for one or several "
            "entities. This process owns their stores; `pps call` and `pps serve mcp` forward to it.")
    multi_entity = True
    stop_grace_s = 10.0  # uvicorn answers what is in flight (at most 5 s), then the stores close

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 = any free port)")
        parser.add_argument("--no-mcp", action="store_true",
                            help="REST only, no MCP at /mcp (starts sooner: the MCP SDK is not imported)")
        parser.add_argument("--public-url", default=None,
                            help="the URL clients reach this server at, when it is not the bound address (behind "
                                 "an HTTPS tunnel or proxy, e.g. https://pps.example.com): OAuth metadata names it")
        parser.add_argument("--no-oauth", action="store_true",
                            help="no OAuth for the MCP endpoints: the entity's static token only")

    async def serve(self, served: Served, options) -> None:
        if not is_loopback(options.host):
            bare = [e.name for e in served if not e.gate.required]
            if bare:
                raise PPSError(f"refusing to listen on {options.host}: entity {bare[0]!r} has no token "
                               "(run `pps init` for it, or bind 127.0.0.1)")
        sock, address = _bind(options.host, options.port)
        mcp = not options.no_mcp
        print(f"pps: serving {', '.join(e.name for e in served)} at {address} (REST /tools"
              f"{', MCP /mcp' if mcp else ''})", file=sys.stderr, flush=True)
        if options.public_url:
            _check_public_url(options.public_url, oauth=mcp and not options.no_oauth)
        public_url = None if options.no_oauth or not mcp else (options.public_url or address).rstrip("/")
        oauth = [e.name for e in served if e.gate.required] if public_url else []
        if oauth:  # what to give claude.ai / Claude Desktop as a connector's URL
            print(f"pps: OAuth connector URL{'s' if len(oauth) > 1 else ''}: "
                  f"{', '.join(f'{public_url}/entities/{n}/mcp' for n in oauth)}", file=sys.stderr, flush=True)
        await run_app(served, sock, address, host=options.host, log_level=options.log_level, mcp=mcp,
                      public_url=public_url)


def _check_public_url(url: str, *, oauth: bool) -> None:
    """``--public-url`` is an origin (scheme, host, port), https unless on loopback (OAuth 2.1 and the MCP
    authorization spec require it); a clear error instead of a traceback at start."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        parts = None
    if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.username
            or parts.path.strip("/") or parts.query or parts.fragment):
        raise PPSError(f"--public-url {url!r}: give the origin clients reach, like https://pps.example.com "
                       "(no path: the routes are served at the root)")
    if oauth and parts.scheme != "https" and not is_loopback(parts.hostname):
        raise PPSError(f"--public-url {url!r}: OAuth needs https beyond loopback (put the server behind an HTTPS "
                       "tunnel or proxy, or pass --no-oauth)")


def _bind(host: str, port: int) -> tuple[socket.socket, str]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise PPSError(f"cannot bind {host}:{port}: {exc}") from None
    reach = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return sock, f"http://{'[' + reach + ']' if ':' in reach else reach}:{sock.getsockname()[1]}"


async def run_app(served: Served, sock: socket.socket, address: str, *, host: str, log_level: str,
                  quiet: bool = False, mcp: bool = True, public_url: str | None = None) -> None:
    """Serve the entities' app on ``sock`` until ``served.stopping`` (or uvicorn's own signal handling); each
    entity's owner lock names ``<address>/entities/<name>`` once the socket accepts. ``quiet``: nothing on
    stdout (beside stdio MCP), no access log. ``mcp=False``: REST only. ``public_url``: OAuth for the MCP endpoints
    of entities that have a token (``.oauth``)."""
    import uvicorn

    from .app import create_app

    app = create_app(list(served), host=host, mcp=mcp, public_url=public_url)
    extra = {"log_config": None, "access_log": False} if quiet else {}
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level,
                                           lifespan="on", timeout_graceful_shutdown=5, **extra))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    stop = asyncio.ensure_future(served.stopping.wait())
    try:
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started:
            for entity in served:
                entity.publish(f"{address}/entities/{entity.name}")
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        server.should_exit = True
        await task
    finally:
        stop.cancel()
        if not task.done():  # cancelled from outside: uvicorn stops too
            server.should_exit = True
            task.cancel()
    if not server.started:
        raise PPSError(f"the HTTP server at {address} stopped before it started (see the log above)")

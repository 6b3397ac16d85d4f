"""``pps serve http``: REST + MCP over streamable HTTP for one or several entities, on loopback by default."""

from __future__ import annotations

import os
import socket
import sys

from .security import is_loopback


class HttpTransport:
    name = "http"
    help = ("REST (POST /tools/<operation>) and MCP over streamable HTTP (/mcp) for one or several "
            "entities. This process owns their stores; `pps call` and `pps serve mcp` forward to it.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 = any free port)")
        parser.add_argument("--entities", help="comma-separated entity names to host beside --entity "
                                               "(each at /entities/<name>/...)")
        parser.add_argument("--log-level", default="warning", help="uvicorn log level")

    def serve(self, args) -> int:
        import uvicorn

        from pps_core import Memory, auth
        from pps_core.errors import PPSError
        from pps_core.owner import OwnerLock
        from pps_core.plugins import build_plugin_manager
        from pps_core.settings import load_settings

        from .app import create_app

        try:
            names = [n.strip() for n in (args.entities or "").split(",") if n.strip()]
            settings = [load_settings(args.entity or (names[0] if names else None), args.home, must_exist=True)]
            settings += [load_settings(n, must_exist=True) for n in names if n != settings[0].entity]
            if not is_loopback(args.host):
                bare = [s.entity for s in settings if not auth.read_token(s.home)]
                if bare:
                    raise PPSError(f"refusing to listen on {args.host}: entity {bare[0]!r} has no token "
                                   "(run `pps init` for it, or bind 127.0.0.1)")
            for s in settings:  # fail early and clearly: a misspelled plugin, a bad setting, another owner
                # layers read their [section] of pps.toml when built (not opened): a wrong type is one line
                # here instead of uvicorn's lifespan traceback
                build_plugin_manager(s.plugins).hook.pps_layers(memory=Memory(s))
                probe = OwnerLock(s.home)
                probe.acquire()
                probe.release()
        except PPSError as exc:
            print(f"pps serve http: error: {exc.message}", file=sys.stderr)
            return 2
        except OSError as exc:  # e.g. a read-only home: the owner lock cannot be taken
            print(f"pps serve http: error: cannot open the entity's home ({exc.strerror or exc}: "
                  f"{exc.filename or ''})", file=sys.stderr)
            return 2
        os.umask(0o077)  # whatever a backend library creates in an entity's home is the owner's alone
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((args.host, args.port))
        except OSError as exc:
            print(f"pps serve http: error: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr)
            return 2
        port = sock.getsockname()[1]
        reach = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        address = f"http://{'[' + reach + ']' if ':' in reach else reach}:{port}"
        app = create_app([Memory(s) for s in settings], host=args.host, address=address)
        config = uvicorn.Config(app, log_level=args.log_level, lifespan="on", timeout_graceful_shutdown=5)
        server = uvicorn.Server(config)
        print(f"pps: serving {', '.join(s.entity for s in settings)} at {address} "
              f"(REST /tools, MCP /mcp)", file=sys.stderr, flush=True)
        try:
            server.run(sockets=[sock])
        except PPSError as exc:
            print(f"pps serve http: error: {exc.message}", file=sys.stderr)
            return 2
        return 0 if server.started else 2

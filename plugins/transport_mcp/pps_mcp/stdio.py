"""``pps serve mcp``: MCP over stdio. Owns the entity's stores, or forwards to the server that does.

Nothing but protocol frames reaches stdout: logs go to stderr, and the SDK points fd 1 at stderr
while it serves, so a stray print from a plugin cannot corrupt the stream.
"""

from __future__ import annotations

import logging
import sys
from contextlib import asynccontextmanager

log = logging.getLogger("pps.mcp")


def configure_logging(level: str = "WARNING") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def serve_stdio(settings, *, forward: bool = True, listen: bool = True, tools: str | None = None,
                      startup: str | None = None) -> None:
    from mcp.server.stdio import stdio_server

    from pps_core.forward import server_address
    from pps_core.memory import Memory

    from .backend import RemoteBackend
    from .server import create_server

    async with stdio_server() as (stdin_stream, stdout_stream), _answer_before_eof(
            stdin_stream, stdout_stream) as (read_stream, write_stream):
        address = server_address(settings.home) if forward else None
        if address:
            log.info("entity %s is served at %s: forwarding every tool call there", settings.entity, address)
            server = create_server(backend=RemoteBackend(address, settings.home), name=f"pps-{settings.entity}",
                                   tools=tools, startup=startup, settings=settings)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        if listen and "http" in settings.plugins:
            await _own_and_listen(settings, read_stream, write_stream, tools=tools, startup=startup)
            return
        async with Memory(settings) as memory:
            server = create_server(memory, tools=tools, startup=startup)
            await server.run(read_stream, write_stream, server.create_initialization_options())


#: After stdin closes, how long the requests already read may take to be answered.
DRAIN_S = 60.0


@asynccontextmanager
async def _answer_before_eof(stdin_stream, stdout_stream):
    """Streams for the server that hold back stdin's end until every request read has its answer.

    The SDK ends the session (cancelling what is in flight) as soon as stdin closes, so a client
    that writes its requests and closes stdin (``pps serve mcp <<EOF``, a script) lost the answers.
    """
    import anyio

    pending: set = set()
    changed = anyio.Event()
    in_send, in_recv = anyio.create_memory_object_stream(0)
    out_send, out_recv = anyio.create_memory_object_stream(0)

    def frame(msg):
        return getattr(msg, "message", None)

    async def pump_in():
        nonlocal changed
        async with in_send:
            async for msg in stdin_stream:
                if isinstance(msg, Exception):  # a line that is no JSON-RPC message: the SDK answers nothing
                    answer = _frame_error(msg)
                    if answer is not None:
                        await out_send.send(answer)
                    continue
                m = frame(msg)
                if getattr(m, "method", None) is not None and getattr(m, "id", None) is not None:
                    pending.add(m.id)
                await in_send.send(msg)
            with anyio.move_on_after(DRAIN_S):
                while pending:
                    await changed.wait()
                    changed = anyio.Event()

    async def pump_out():
        async with stdout_stream:
            async for msg in out_recv:
                await stdout_stream.send(msg)
                m = frame(msg)
                if getattr(m, "method", None) is None and getattr(m, "id", None) in pending:
                    pending.discard(m.id)
                    changed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_in)
        tg.start_soon(pump_out)
        try:
            yield in_recv, out_send
        finally:
            await out_send.aclose()
            tg.cancel_scope.cancel()


def _frame_error(exc: Exception):
    """The JSON-RPC error answering a line the SDK could not read (``exc``), or None for a blank line.

    Not JSON, or nested past the parser's depth: -32700 with id null. JSON but not a JSON-RPC message:
    -32600, with the request's id when it has a usable one. The session goes on either way.
    """
    from mcp.shared.message import SessionMessage
    from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

    errors = exc.errors() if callable(getattr(exc, "errors", None)) else []
    first = errors[0] if errors else {}
    raw = first.get("input")
    if first.get("type") == "json_invalid":
        if isinstance(raw, str | bytes) and not raw.strip():
            return None
        detail = str(first.get("ctx", {}).get("error", "")) or "not JSON"
        message = "Parse error: the frame nests too deep" if "recursion" in detail else f"Parse error: {detail}"
        code, rid = PARSE_ERROR, None
    else:
        code, message = INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
        ids = [e["input"].get("id") for e in errors if isinstance(e.get("input"), dict)]
        rid = next((i for i in ids if isinstance(i, str | int) and not isinstance(i, bool)), None)
    log.warning("answered an unreadable frame with %d: %s", code, message)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=code, message=message)))


async def _own_and_listen(settings, read_stream, write_stream, **profile) -> None:
    """Own the stores and also answer REST on a loopback port, so other channels (Claude Code's
    capture hooks, `pps call`, a bot) forward here instead of failing on the owner lock."""
    from pps_core.memory import Memory

    memory = Memory(settings)
    # Opened here, not only in the app's lifespan: a store another process owns (or a plugin that
    # fails) is then the same one-line error as without the listener, not uvicorn's traceback.
    await memory.open()
    try:
        await _listen(memory, settings, read_stream, write_stream, **profile)
    finally:
        await memory.close()


async def _listen(memory, settings, read_stream, write_stream, **profile) -> None:
    import asyncio
    import socket

    import uvicorn
    from pps_http.app import create_app

    from .server import create_server

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    address = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = create_app([memory], host="127.0.0.1", address=address)
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=3)
    web = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(web.serve(sockets=[sock]))
    while not web.started and not task.done():
        await asyncio.sleep(0.02)
    if task.done():  # the lifespan failed (e.g. another owner): report it like the plain path would
        await task
        raise RuntimeError("the loopback listener stopped before it started")
    log.info("owning %s; other channels reach it at %s", settings.entity, address)
    try:
        server = create_server(memory, **profile)
        await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        web.should_exit = True
        await task


class McpTransport:
    name = "mcp"
    help = ("MCP over stdio for one entity (Claude Code, Claude Desktop). Forwards to the entity's "
            "HTTP server when one runs; otherwise owns the stores itself.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--local", action="store_true",
                            help="never forward: own the stores (fails if a server owns them)")
        parser.add_argument("--log-level", default="WARNING", help="log level (logs go to stderr)")
        parser.add_argument("--no-listen", action="store_true",
                            help="when owning the stores, do not also answer REST on a loopback port "
                                 "(by default other channels forward there when the 'http' plugin is loaded)")
        parser.add_argument("--tools", help="tool profile: all, essential, or a comma list of operations "
                                            "(default [mcp] tools, 'all')")
        parser.add_argument("--startup", choices=["tool", "hooks"],
                            help="hooks: the startup package is injected by hooks, so the instructions do not "
                                 "ask the model to fetch it (default [mcp] startup, 'tool')")

    def serve(self, args) -> int:
        import anyio

        from pps_core.errors import PPSError
        from pps_core.settings import load_settings

        configure_logging(args.log_level)
        try:
            settings = load_settings(args.entity, args.home, must_exist=True)
            from .profiles import mcp_settings, parse_profile

            parse_profile(mcp_settings(settings, tools=args.tools).tools)  # a bad profile fails before serving
            anyio.run(lambda: serve_stdio(settings, forward=not args.local, listen=not args.no_listen,
                                          tools=args.tools, startup=args.startup))
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

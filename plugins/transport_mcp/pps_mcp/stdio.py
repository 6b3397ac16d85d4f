"""``pps serve mcp``: MCP over stdio. The kernel owns the entity's stores here, or forwards to the server that
does (``pps_core.serving``), and answers other processes on its local channel when it owns them.

Nothing but protocol frames reaches stdout: logs go to stderr, and the SDK points fd 1 at stderr
while it serves, so a stray print from a plugin cannot corrupt the stream.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from pps_core.reach import Caller
from pps_core.transport import Served, Transport

log = logging.getLogger("pps.mcp")


class McpTransport(Transport):
    name = "mcp"
    help = ("MCP over stdio for one entity (Claude Code, Claude Desktop). Forwards to the process that "
            "serves the entity when one runs; otherwise owns the stores itself.")
    forwards = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("--tools", help="tool profile: all, essential, or a comma list of operations "
                                            "(default [mcp] tools, 'essential')")
        parser.add_argument("--startup", choices=["tool", "hooks"],
                            help="hooks: the startup package is injected by hooks, so the instructions do not "
                                 "ask the model to fetch it (default [mcp] startup, 'tool')")

    async def serve(self, served: Served, options) -> None:
        from mcp.server.stdio import stdio_server

        from .server import create_server

        entity = served.primary
        if entity.memory is None:
            log.info("entity %s is served elsewhere: forwarding every tool call there", entity.name)
        # the profile is checked before the first frame: a bad one fails with its message
        server = create_server(entity=entity, caller=Caller.trusted("stdio"), tools=options.tools,
                               startup=options.startup)
        async with stdio_server() as (stdin_stream, stdout_stream), _answer_before_eof(
                stdin_stream, stdout_stream) as (read_stream, write_stream):
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

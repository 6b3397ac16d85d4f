"""``create_server(memory)``: an MCP server whose tools are the entity's operation catalog.

Built on the SDK's low-level ``mcp.server.Server`` (MCPServer derives schemas from Python function
signatures; ours come from the catalog's parameter models, so the low-level handlers are the fit).
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server import Server

from pps_core import PPSError
from pps_core.catalog import ToolSpec
from pps_core.reach import Caller, Entity, LocalEntity

log = logging.getLogger("pps.mcp")


def tool_from_spec(spec: ToolSpec, *, compact: bool = False) -> types.Tool:
    """``compact`` (the ``essential`` profile) leaves out the hints the MCP specification makes meaningless or
    default: ``destructiveHint``/``idempotentHint`` of a read-only tool ("meaningful only when readOnlyHint ==
    false"), ``readOnlyHint: false`` and ``idempotentHint: false`` (their defaults). Nothing a client reads
    changes; ``destructiveHint: false`` and ``openWorldHint: false`` differ from the defaults and stay."""
    if compact:
        annotations = types.ToolAnnotations(
            read_only_hint=True if spec.read_only else None,
            destructive_hint=None if spec.read_only else spec.destructive,
            idempotent_hint=True if spec.idempotent and not spec.read_only else None,
            open_world_hint=False,
        )
    else:
        annotations = types.ToolAnnotations(
            read_only_hint=spec.read_only, destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent, open_world_hint=False,
        )
    return types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema,
                      annotations=annotations)


def success_result(result: Any, tz: Any = None) -> types.CallToolResult:
    """The text content is for the model to read, ``structuredContent`` the data, never the same thing twice: a
    result with a ``text`` key (ambient_recall) shows that markdown, and its data goes without it; any other
    result shows as a listing (``pps_core.cli_text.readable``: one line per hit, times in ``tz``)."""
    from pps_core.cli_text import readable

    text = readable(result, tz)
    if isinstance(result, dict):
        structured = {k: v for k, v in result.items() if k != "text"} if isinstance(result.get("text"), str) \
            else result
    else:
        structured = {"result": result}
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)


def error_result(exc: PPSError) -> types.CallToolResult:
    """A tool error the model can read and correct: the message names the parameter at fault."""
    text = f"{exc.code}: {exc.message}"
    if exc.param and exc.param not in exc.message:
        text += f" (parameter: {exc.param})"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=exc.to_dict(), is_error=True)


async def call_tool(entity: Entity, caller: Caller, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """A tool's own failure is a tool result the model can read (``is_error``); a tool that does not exist is a
    JSON-RPC protocol error (-32602 Invalid params), as the MCP specification asks."""
    from mcp.shared.exceptions import MCPError
    from mcp_types.jsonrpc import INVALID_PARAMS

    from pps_core.errors import UnknownOperation

    try:
        return success_result(await entity.call(name, arguments, caller=caller), _zone(entity))
    except UnknownOperation as exc:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}", data=exc.to_dict()) from None
    except PPSError as exc:
        return error_result(exc)


def _zone(entity: Entity) -> Any:
    """The entity's zone, for the times of a listing (None: shown as stored, UTC)."""
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(entity.settings.timezone)
    except Exception:
        return None


def create_server(memory=None, *, entity: Entity | None = None, caller: Caller | None = None,
                  name: str | None = None, tools: str | list[str] | None = None, startup: str | None = None,
                  settings=None) -> Server:
    """An MCP server for one entity: the kernel's ``entity`` (opened here or forwarded, see
    :mod:`pps_core.reach`) or an opened ``memory``. ``caller`` is who the transport admitted (default: trusted,
    the process at the other end of the pipe).

    ``tools`` is the tool profile and ``startup`` who brings the startup package (see :mod:`.profiles`);
    by default both come from ``[mcp]`` of the entity's settings.
    """
    from .profiles import INSTRUCTIONS, mcp_settings, parse_profile, select

    if entity is None:
        if memory is None:
            raise ValueError("create_server needs an entity or a memory")
        entity = LocalEntity(memory)
    caller = caller or Caller.trusted("stdio")
    if name is None:
        name = f"pps-{entity.name}"
    settings = settings if settings is not None else entity.settings
    conf = mcp_settings(settings, tools=tools, startup=startup)
    profile, startup = parse_profile(conf.tools), conf.startup
    if entity.memory is not None:  # the catalog is known: a profile naming a missing operation fails here, clearly
        select([op.spec() for op in entity.memory.catalog], profile)
    listed: dict[int, types.ListToolsResult] = {}

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        specs = await entity.tools()
        if id(specs) not in listed:  # a local entity keeps one list per catalog: build the tools once
            listed.clear()
            listed[id(specs)] = types.ListToolsResult(tools=[tool_from_spec(s, compact=profile == "essential")
                                                              for s in select(specs, profile)])
        return listed[id(specs)]

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await call_tool(entity, caller, params.name, params.arguments)

    from pps_core import __version__

    # No tool declares x-mcp-header parameters, so there is nothing for the SDK to check per call;
    # without this it would rebuild the tool list on every call to look for some.
    server = Server(name, version=__version__, on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                    get_tool_input_schema=lambda _name: None,
                    instructions=INSTRUCTIONS[startup])
    # The SDK's OpenTelemetry middleware is a no-op without an exporter but costs ~0.5 ms a call; PPS
    # never traces on the read path (DESIGN §7), so it is dropped, as the SDK documents.
    server.middleware[:] = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    server.pps_entity = entity  # type: ignore[attr-defined]
    _publish(server, entity, caller, settings)
    return server


def _publish(server: Server, entity: Entity, caller: Caller, settings) -> None:
    """Resources and prompts of the entity's plugins (``pps_resources``/``pps_prompts``), read through the
    entity for the caller, as its tool calls are."""
    from pps_core.publish import Published

    from .published import publish

    memory = entity.memory
    pm = memory.load_catalog() if memory is not None else None  # the entity's plugins; opens no store
    if pm is None and settings is not None:  # forwarding: the plugins' descriptions, without opening any store
        from pps_core.plugins import build_plugin_manager

        try:
            pm = build_plugin_manager(settings.plugins)
        except PPSError as exc:
            log.warning("no resources or prompts: %s", exc.message)
            return
    if pm is None:
        return

    async def call(name: str, params: dict[str, Any]) -> Any:
        return await entity.call(name, params, caller=caller)

    publish(server, Published.collect(pm, settings), call, memory=memory, tools=entity.tools)

"""MCP resources, resource templates, prompts and completion from what the entity's plugins publish
(``pps_resources``/``pps_prompts``, :mod:`pps_core.publish`), and the notifications when they change.

Everything is read through ``call`` (the same path as a tool call, so a forwarding server reads through its
owner). Changes are noticed after each successful operation that a family names in ``changed_by``: for an
entity opened in this process, whoever called it (a listener on ``pps_operation_called``); when forwarding,
the calls made through this server. Clients hear of them both ways MCP has: ``notifications/resources/
list_changed`` (only when the listed URIs really changed) and ``notifications/resources/updated`` for the
resources they subscribed to (``resources/subscribe``), and the same events on ``subscriptions/listen``
streams (protocol 2026-07-28).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp.shared.exceptions import MCPError

from pps_core import PPSError, hookimpl
from pps_core.publish import Call, Published

log = logging.getLogger("pps.mcp")
MAX_SESSIONS = 256


def _error(exc: PPSError, uri: str | None = None) -> MCPError:
    """A PPS error as a JSON-RPC error: 4xx are invalid params (a resource that is not there too, with its URI in
    ``data``: SEP-2164 of protocol 2026-07-28, as the SDK's own servers answer), the rest internal errors."""
    from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS

    data = exc.to_dict()
    if uri is not None:
        data["uri"] = uri
    code = INVALID_PARAMS if 400 <= exc.status < 500 else INTERNAL_ERROR
    return MCPError(code=code, message=exc.message, data=data)


class Publisher:
    """One MCP server's view of what is published, and who to tell when it changes."""

    def __init__(self, published: Published, call: Call) -> None:
        self.published = published
        self.call = call
        self.bus = InMemorySubscriptionBus()
        # One session per client connection (the SDK makes a session object per request: the newest is kept),
        # keyed by the connection's initialize params; at most MAX_SESSIONS, the oldest dropped first.
        self.sessions: dict[int, Any] = {}
        self.subscribed: dict[int, set[str]] = {}
        self.listed: dict[str, tuple[str, ...]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def seen(self, ctx) -> int:
        session = ctx.session
        key = id(getattr(session, "client_params", None) or session)
        self.sessions.pop(key, None)
        self.sessions[key] = session
        while len(self.sessions) > MAX_SESSIONS:
            old = next(iter(self.sessions))
            self.sessions.pop(old)
            self.subscribed.pop(old, None)
        return key

    # -- handlers ------------------------------------------------------------------------------

    async def list_resources(self, ctx, params) -> types.ListResourcesResult:
        self.seen(ctx)
        out = []
        for family in self.published.families:
            found = await self._items(family)
            self.listed[family.family] = tuple(i.uri for i in found)
            out += [types.Resource(uri=i.uri, name=i.name, title=i.title, description=i.description,
                                   mime_type=i.mime_type) for i in found]
        return types.ListResourcesResult(resources=out)

    async def _items(self, family):
        try:
            return await family.items(self.call)
        except PPSError as exc:  # one family's layer is down: the others are still listed
            log.warning("resources of %s are unavailable: %s", family.base, exc.message)
            return []

    async def list_templates(self, ctx, params) -> types.ListResourceTemplatesResult:
        self.seen(ctx)
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(uri_template=f.template, name=f.family, description=f.description,
                                   mime_type=f.mime_type) for f in self.published.families if f.template])

    async def read_resource(self, ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        self.seen(ctx)
        uri = str(params.uri)
        try:
            mime, text = await self.published.read(self.call, uri)
        except PPSError as exc:
            raise _error(exc, uri) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)])

    async def subscribe(self, ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.setdefault(self.seen(ctx), set()).add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.get(self.seen(ctx), set()).discard(str(params.uri))
        return types.EmptyResult()

    async def list_prompts(self, ctx, params) -> types.ListPromptsResult:
        self.seen(ctx)
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=p.name, title=p.title, description=p.description, arguments=[
                types.PromptArgument(name=a.name, description=a.description, required=a.required)
                for a in p.arguments]) for p in self.published.prompts.values()])

    async def get_prompt(self, ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        self.seen(ctx)
        try:
            prompt, messages = await self.published.prompt(self.call, params.name, params.arguments)
        except PPSError as exc:
            raise _error(exc) from None
        return types.GetPromptResult(description=prompt.description, messages=[
            types.PromptMessage(role=m.role, content=types.TextContent(type="text", text=m.text)) for m in messages])

    async def complete(self, ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        values: list[str] = []
        ref = params.ref
        if isinstance(ref, types.ResourceTemplateReference):
            family = next((f for f in self.published.families if f.template == ref.uri), None)
            if family is not None and family.complete is not None:
                try:
                    values = await family.complete(self.call, params.argument.name, params.argument.value)
                except PPSError:
                    values = []
        return types.CompleteResult(completion=types.Completion(values=values, has_more=False))

    # -- changes -------------------------------------------------------------------------------

    def operation_done(self, name: str, read_only: bool) -> None:
        """After a successful operation (sync: from a hook or a handler); tells clients in the background."""
        families = self.published.changed(name, read_only)
        if not families:
            return
        task = asyncio.get_running_loop().create_task(self.changed(families))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def changed(self, families) -> None:
        for family in families:
            found = tuple(i.uri for i in await self._items(family))
            if self.listed.get(family.family) != found:
                self.listed[family.family] = found
                await self._tell_list_changed()
            for uri in found:
                await self.bus.publish(ResourceUpdated(uri=uri))
            for key, uris in list(self.subscribed.items()):
                for uri in sorted(u for u in uris if family.holds(u)):
                    await self._send(key, "send_resource_updated", uri)

    async def _tell_list_changed(self) -> None:
        await self.bus.publish(ResourcesListChanged())
        for key in list(self.sessions):
            await self._send(key, "send_resource_list_changed")

    async def _send(self, key: int, method: str, *args) -> None:
        session = self.sessions.get(key)
        if session is None:
            return
        try:
            await getattr(session, method)(*args)
        except Exception as exc:  # noqa: BLE001 - the client has gone: forget it
            log.debug("could not notify an MCP session (%s): dropped", exc)
            self.sessions.pop(key, None)
            self.subscribed.pop(key, None)


class _Listener:
    """Registered on the entity's plugin manager: every successful call, whoever made it, may change resources."""

    def __init__(self, publisher: Publisher) -> None:
        self.publisher = weakref.ref(publisher)

    @hookimpl
    def pps_operation_called(self, memory, name: str, status: int) -> None:
        publisher = self.publisher()
        if publisher is not None and status == 200:
            op = memory.catalog.get(name)
            publisher.operation_done(name, op.read_only if op is not None else True)


def publish(server: Server, published: Published, call: Call, *, memory=None, tools=None) -> Publisher:
    """Serve ``published`` on ``server``: resources, templates, subscriptions, prompts, completion, and change
    notifications (through ``memory``'s operation events when the entity is open here, else after this server's
    own tool calls, whose read-only flags ``tools``, an async list of the backend's tool specs, gives)."""
    pub = Publisher(published, call)
    if published.families:
        server.add_request_handler("resources/list", types.PaginatedRequestParams, pub.list_resources)
        server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, pub.list_templates)
        server.add_request_handler("resources/read", types.ReadResourceRequestParams, pub.read_resource)
        server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, pub.subscribe)
        server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, pub.unsubscribe)
        server.add_request_handler("completion/complete", types.CompleteRequestParams, pub.complete)
        server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams,
                                   ListenHandler(pub.bus))
        # Clients of the 2025 protocol learn from the capabilities that list changes are announced.
        make = server.create_initialization_options

        def initialization_options(notification_options=None, *args, **kwargs):
            return make(notification_options or NotificationOptions(resources_changed=True), *args, **kwargs)

        server.create_initialization_options = initialization_options  # type: ignore[method-assign]
    if published.prompts:
        server.add_request_handler("prompts/list", types.PaginatedRequestParams, pub.list_prompts)
        server.add_request_handler("prompts/get", types.GetPromptRequestParams, pub.get_prompt)
    if memory is not None and getattr(memory, "pm", None) is not None:
        memory.pm.register(_Listener(pub), name=f"mcp:resources-{id(pub)}")  # a part of mcp: not listed
    else:
        entry = server.get_request_handler("tools/call")
        if entry is not None:
            inner = entry.handler

            async def call_tool(ctx, params: types.CallToolRequestParams):
                result = await inner(ctx, params)
                if not getattr(result, "is_error", False):
                    specs = await tools() if tools is not None else []
                    pub.operation_done(params.name, next((s.read_only for s in specs if s.name == params.name),
                                                         True))
                return result

            server.add_request_handler("tools/call", entry.params_type, call_tool)
    return pub

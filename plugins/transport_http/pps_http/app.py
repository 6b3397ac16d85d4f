"""``create_app(memories)``: REST routes and MCP over streamable HTTP, generated from each entity's catalog.

Routes per hosted entity ``<name>``: ``POST /entities/<name>/tools/<operation>``, ``GET
/entities/<name>/tools`` and MCP at ``/entities/<name>/mcp``. The first (primary) entity is also served
at ``/tools/...`` and ``/mcp``. Operations come from plugins when the memory opens, so the tool
routes are added in the lifespan, before the first request.
"""

from __future__ import annotations

import json
import time
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.routing import Route

from pps_core import Memory, __version__
from pps_core.catalog import Operation
from pps_core.errors import InvalidParams, PPSError
from pps_core.reach import Caller, Entity, LocalEntity

from .docs import add_docs_routes
from .security import BearerGuard, BodyLimit, EntityAuth, FoldHost, challenge, is_loopback


def _error(exc: PPSError) -> JSONResponse:
    value = challenge(exc)
    return JSONResponse(exc.to_dict(), status_code=exc.status, headers={"WWW-Authenticate": value} if value else None)


def _json_body(raw: bytes) -> Any:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise InvalidParams(f"request body is not valid JSON: {exc}") from None
    except RecursionError:  # nested past the parser's depth: far past what any operation accepts
        raise InvalidParams("request body nests too deep") from None
    if not isinstance(body, dict):  # an empty body means {}; an explicit null or list is a mistake
        raise InvalidParams(f"the request body must be a JSON object of parameters, got {type(body).__name__}")
    return body


class _Entity:
    """One hosted entity: the kernel's entity (calls, auth, limits), its HTTP auth, its MCP session manager."""

    def __init__(self, reached: LocalEntity, host: str, *, mcp: bool = True, public_url: str | None = None,
                 primary: bool = False) -> None:
        assert reached.memory is not None
        self.reached = reached
        self.memory = memory = reached.memory
        self.name = reached.name
        self.auth = EntityAuth(self.name, memory.home, gate=reached.gate)
        self.public_url = public_url
        self.mcp = self._mcp_manager(reached, host) if mcp else None
        self.oauth = None  # OAuth for the MCP endpoint (.oauth): when the server knows its URL and the entity a token
        if mcp and public_url and self.auth.required:
            from .oauth import EntityOAuth

            paths = [f"/entities/{self.name}/mcp"] + (["/mcp"] if primary else [])
            self.oauth = EntityOAuth(self.name, memory.home, self.auth.gate, public_url, paths,
                                     sensitive=lambda: {op.name for op in memory.catalog if op.sensitive})

    def _mcp_manager(self, reached: LocalEntity, host: str):
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings
        from pps_mcp.server import create_server

        if is_loopback(host):
            security = TransportSecuritySettings(
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])
            if self.public_url and not is_loopback(urlsplit(self.public_url).hostname or ""):  # behind a tunnel
                public = urlsplit(self.public_url)
                security.allowed_hosts.append(public.netloc.lower())
                security.allowed_origins.append(f"{public.scheme}://{public.netloc}".lower())
        else:  # reachable from elsewhere: the bearer token is the gate (a token is required there)
            security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        # BearerGuard admits only the entity's token, so an MCP caller of an entity that has one is vouched
        # for; without a token the kernel still refuses it a sensitive operation, as on the REST routes.
        caller = Caller.trusted("http+mcp") if self.auth.required else Caller(via="http+mcp")
        return StreamableHTTPSessionManager(
            app=create_server(entity=reached, caller=caller), json_response=True,
            security_settings=security,
            max_request_body_size=reached.max_request_bytes)

    def mcp_endpoint(self, path: str):
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

        if self.oauth is not None:  # the SDK's bearer middleware: the entity's token or an OAuth access token
            return self.oauth.guard(FoldHost(StreamableHTTPASGIApp(self.mcp)), f"{self.oauth.base}{path}")
        return BearerGuard(FoldHost(StreamableHTTPASGIApp(self.mcp)), self.auth)


#: How often a server of a fleet reads the fleet's token from the store (a rotation elsewhere is in force here
#: within this); a rotation on this server is in force here at once.
TOKEN_SYNC_S = 0.5


@asynccontextmanager
async def _fleet_token(entity: _Entity):
    """An entity several servers serve, with a token: the store keeps the fleet's token (its digest), so one
    rotated on any server is refused by all of them, and a server started with its home's stale copy takes the
    fleet's (:func:`pps_core.auth.sync_fleet_token`); a server whose home holds another token keeps its own."""
    import asyncio
    import logging

    from pps_core import auth
    from pps_core.contracts import SharedValues

    stores = entity.memory.find(SharedValues) if entity.memory.shared else []
    gate = entity.reached.gate
    if not stores or not gate.required:
        yield
        return
    store = stores[0]
    seen: list[str | None] = []

    async def sync() -> None:
        mine = gate.current()
        # the file changed here since (a rotation, a new copy): the fleet retires the token it replaced
        changed = bool(seen) and mine != seen[0] and seen[0] is not None
        await auth.sync_fleet_token(store, gate, rotated_from=seen[0] if changed else None)
        seen[:] = [mine]

    async def keep() -> None:
        warned = False
        while True:
            await asyncio.sleep(TOKEN_SYNC_S)
            try:
                await sync()
                warned = False
            except Exception as exc:  # the store is down: the last token known stays in force
                if not warned:
                    logging.getLogger("pps.http").warning("cannot read the fleet's token: %s", exc)
                    warned = True

    await sync()  # before the first request: a stale home's token is never accepted
    task = asyncio.get_running_loop().create_task(keep(), name=f"pps-token-{entity.name}")
    try:
        yield
    finally:
        task.cancel()


def _tool_endpoint(entity: _Entity, op: Operation):
    async def endpoint(request: Request) -> JSONResponse:
        try:
            caller = entity.auth.caller_of(request.scope)
            entity.reached.admit(caller, sensitive=op.sensitive)  # before the body is read
            raw = await request.body()
            params = _json_body(raw)
            started = time.perf_counter()
            result = await entity.reached.call(op.name, params, caller=caller, size=len(raw))
            took = (time.perf_counter() - started) * 1000
            return JSONResponse(result, headers={"Server-Timing": f"op;dur={took:.2f}"})
        except PPSError as exc:
            return _error(exc)

    endpoint.__name__ = f"{entity.name}_{op.name}"
    return endpoint


def _unknown_endpoint(entity: _Entity):
    """An operation the entity does not have: the same JSON error as in-process (``unknown_operation``, naming it
    and the loaded plugins), so a client forwarding here (``pps call``, ``pps serve mcp``) reads what it would
    read locally. Checked after the token: a caller without it learns nothing about the catalog."""

    async def unknown_tool(request: Request, name: str) -> Response:
        try:
            entity.auth.check_scope(request.scope)
            entity.memory.operation(name)  # raises UnknownOperation
        except PPSError as exc:
            return _error(exc)
        return _error(PPSError(f"{name}: no route"))  # pragma: no cover - every operation has its own route

    unknown_tool.__name__ = f"{entity.name}__unknown_tool"
    return unknown_tool


def _list_endpoint(entity: _Entity):
    listing: list[bytes] = []  # the catalog is fixed once the memory is open: encode it once

    async def list_tools(request: Request) -> Response:
        try:
            entity.auth.check_scope(request.scope)
        except PPSError as exc:
            return _error(exc)
        if not listing:
            listing.append(JSONResponse({"entity": entity.name, "tools": [
                spec.to_dict() for spec in await entity.reached.tools()]}).body)
        return Response(listing[0], media_type="application/json")

    return list_tools


def _metrics_endpoint(entity: _Entity):
    """Prometheus text for one entity (``pps_core.metrics``), behind the entity's token like its operations."""

    async def metrics(request: Request) -> Response:
        from pps_core.metrics import prometheus_text

        try:
            entity.auth.check_scope(request.scope)
        except PPSError as exc:
            return _error(exc)
        return Response(await prometheus_text(entity.memory), media_type="text/plain; version=0.0.4; charset=utf-8")

    metrics.__name__ = f"{entity.name}_metrics"
    return metrics


def _schema_ref(op: Operation, components: dict[str, Any], owners: dict[str, type]) -> str:
    key = op.params.__name__
    if owners.setdefault(key, op.params) is not op.params:
        key = f"{op.name}_{key}"
        owners[key] = op.params
    schema = op.params.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(schema.pop("$defs", {}))
    components[key] = schema
    return f"#/components/schemas/{key}"


_ERROR_SCHEMA = {"title": "PPSError", "type": "object", "required": ["error", "message"],
                 "properties": {"error": {"type": "string", "description": "machine-readable code"},
                                "message": {"type": "string"},
                                "param": {"type": "string", "description": "the parameter at fault"}}}
_ERROR_ANSWERS = {"401": "no bearer token", "403": "not this entity's token", "404": "unknown id or file",
                  "409": "conflicts with the store (nothing written)", "413": "request body too large",
                  "422": "invalid parameters (naming the parameter)",
                  "503": "a layer or backend this operation needs is unavailable (e.g. no LLM configured)"}
_ERROR_RESPONSES = {code: {"description": why, "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/PPSError"}}}} for code, why in _ERROR_ANSWERS.items()}


def _add_tool_routes(app: FastAPI, entity: _Entity, primary: bool, components: dict, owners: dict) -> None:
    prefixes = [f"/entities/{entity.name}"] + ([""] if primary else [])
    for op in entity.memory.catalog:
        ref = _schema_ref(op, components, owners)
        required = bool(op.params.model_json_schema().get("required"))
        extra = {"requestBody": {"required": required,
                                 "content": {"application/json": {"schema": {"$ref": ref}}}},
                 "responses": _ERROR_RESPONSES}
        for prefix in prefixes:
            app.add_api_route(
                f"{prefix}/tools/{op.name}", _tool_endpoint(entity, op), methods=["POST"],
                summary=op.name, description=op.description, tags=[entity.name if prefix else op.group],
                operation_id=f"{entity.name}__{op.name}" if prefix else op.name,
                openapi_extra=extra, response_model=None)
    for prefix in prefixes:  # after every operation's own route: a name no route matched
        app.add_api_route(f"{prefix}/tools/{{name}}", _unknown_endpoint(entity), methods=["POST"],
                          include_in_schema=False)
    for prefix in prefixes:
        app.add_api_route(f"{prefix}/tools", _list_endpoint(entity), methods=["GET"],
                          summary="the entity's operations", include_in_schema=True,
                          openapi_extra={"responses": {c: _ERROR_RESPONSES[c] for c in ("401", "403")}},
                          operation_id=f"{entity.name}__list_tools" if prefix else "list_tools")


def _mount_pages(app: FastAPI, entity: _Entity) -> None:
    """Let the entity's plugins add routes (``pps_http_mount``: the memory explorer's pages)."""
    from . import hookspecs

    pm = entity.memory.pm
    caller = getattr(pm.hook, "pps_http_mount", None)
    if caller is None:
        return
    if not caller.has_spec():  # the entity lists a page plugin but not 'http' itself
        pm.add_hookspecs(hookspecs)
    pm.hook.pps_http_mount(app=app, memory=entity.memory, auth=entity.auth, oauth=entity.oauth)


def create_app(hosted: Memory | Entity | list[Memory] | list[Entity], *, host: str = "127.0.0.1",
               address: str | None = None, mcp: bool = True, public_url: str | None = None) -> FastAPI:
    """A FastAPI app for one or several entities (the kernel's, as ``pps serve`` reached them, or memories: they
    are opened in the app's lifespan when they are not open yet); the first is also served at the bare paths.

    ``mcp=False``: REST only, no ``/mcp`` (the MCP SDK is not even imported: a server started for the forwarding
    protocol alone starts sooner). ``address`` (e.g. ``http://127.0.0.1:8765``) is written to each entity's owner lock in the lifespan, so CLI
    calls and stdio MCP servers forward to this server (``pps serve`` publishes once the socket accepts instead).
    ``public_url``: the URL clients reach this server at; with it, each entity that has a token gets OAuth for its
    MCP endpoint (``.oauth``: what claude.ai and Claude Desktop connectors need).
    """
    given = [hosted] if isinstance(hosted, Memory | Entity) else list(hosted)
    if not given:
        raise ValueError("create_app needs at least one entity")
    reached = [LocalEntity(h) if isinstance(h, Memory) else h for h in given]
    if any(not isinstance(r, LocalEntity) for r in reached):
        raise ValueError("the HTTP app serves entities this process owns, not forwarded ones")
    entities = {r.name: _Entity(r, host, mcp=mcp, public_url=public_url, primary=r is reached[0])
                for r in reached if isinstance(r, LocalEntity)}
    if len(entities) != len(given):
        raise ValueError("two hosted entities have the same name")
    primary = next(iter(entities.values()))
    components: dict[str, Any] = {"PPSError": _ERROR_SCHEMA}
    owners: dict[str, type] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncExitStack() as stack:
            for entity in entities.values():
                if not entity.memory.opened:  # plugins start their background work
                    await stack.enter_async_context(entity.memory)
                if address:
                    entity.reached.publish(f"{address.rstrip('/')}/entities/{entity.name}")
            for entity in entities.values():
                _add_tool_routes(app, entity, entity is primary, components, owners)
                _mount_pages(app, entity)
                if entity.mcp is not None:
                    # an entity several servers may serve: MCP without sessions (stateless streamable HTTP), so a
                    # client's calls may reach any server behind a load balancer; one server alone keeps sessions
                    # (subscriptions to resources notify within them)
                    entity.mcp.stateless = entity.memory.shared
                    await stack.enter_async_context(entity.mcp.run())
                await stack.enter_async_context(_fleet_token(entity))
            app.openapi_schema = None
            yield

    app = FastAPI(title="PPS", version=__version__, lifespan=lifespan,
                  description="Pattern Persistence System: memory for AI entities. "
                              "Every route is generated from the entity's operation catalog.",
                  openapi_url=None, docs_url=None, redoc_url=None)  # served per caller by .docs
    app.state.entities = entities

    @app.get("/health", tags=["health"])
    async def health() -> dict[str, Any]:
        """Liveness (no token needed). The entity's detailed health is the `pps_health` operation."""
        return {"ok": all(e.memory.opened for e in entities.values()), "entities": len(entities)}

    @app.get("/ready", tags=["health"])
    async def ready() -> JSONResponse:
        """Readiness (no token needed): 200 when every entity's stores answer now, 503 with why not (a database
        server down) so a load balancer sends calls elsewhere; `/health` stays liveness (the process is up)."""
        waiting = {e.name: why for e in entities.values() if (why := await e.memory.ready())}
        return JSONResponse({"ready": not waiting, "entities": len(entities), **({"not_ready": waiting} if waiting
                                                                                   else {})},
                            status_code=503 if waiting else 200)

    for entity in entities.values():
        if mcp:
            app.router.routes.append(Route(f"/entities/{entity.name}/mcp", entity.mcp_endpoint(
                f"/entities/{entity.name}/mcp")))
        if entity.oauth is not None:
            app.router.routes.extend(entity.oauth.routes())
        app.add_api_route(f"/entities/{entity.name}/metrics", _metrics_endpoint(entity), methods=["GET"],
                          include_in_schema=False)
    app.add_api_route("/metrics", _metrics_endpoint(primary), methods=["GET"], include_in_schema=False)
    if mcp:
        app.router.routes.append(Route("/mcp", primary.mcp_endpoint("/mcp")))

    add_docs_routes(app, entities, primary.name, components)

    def limit_for(path: str) -> int:
        parts = path.split("/")
        entity = entities.get(parts[2]) if len(parts) > 2 and parts[1] == "entities" else None
        return (entity or primary).reached.max_request_bytes

    app.add_middleware(BodyLimit, limit_for=limit_for)
    return app

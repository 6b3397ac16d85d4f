"""``/openapi.json`` and ``/docs``: each caller sees only the entities it may call.

The document names every hosted entity in its paths, so a token-protected entity's routes appear only
to the holder of its token, and a tokenless entity's only to a request that passes its browser checks.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response

from pps_core.errors import PPSError, Unauthorized

PUBLIC = ("/health", "/ready")


def _owner(path: str, primary: str) -> str | None:
    if path in PUBLIC:
        return None
    parts = path.split("/")
    return parts[2] if len(parts) > 2 and parts[1] == "entities" else primary


def add_docs_routes(app: FastAPI, entities: dict[str, Any], primary: str, components: dict[str, Any]) -> None:
    """Serve the OpenAPI document and Swagger UI filtered per caller (the app is built with them off)."""

    def full() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(components)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = full

    def visible(request: Request) -> set[str] | PPSError:
        names, refusals = set(), []
        for name, entity in entities.items():
            try:
                entity.auth.check_scope(request.scope)
                names.add(name)
            except PPSError as exc:
                refusals.append(exc)
        if names:
            return names
        unauthorized = [e for e in refusals if isinstance(e, Unauthorized)]
        return unauthorized[0] if unauthorized and "authorization" not in request.headers else refusals[0]

    def refuse(exc: PPSError) -> JSONResponse:
        from .security import challenge

        value = challenge(exc)
        return JSONResponse(exc.to_dict(), status_code=exc.status, headers={"WWW-Authenticate": value} if value else None)

    async def openapi_json(request: Request) -> Response:
        names = visible(request)
        if isinstance(names, PPSError):
            return refuse(names)
        schema = copy.copy(full())
        schema["paths"] = {p: v for p, v in schema["paths"].items() if _owner(p, primary) in names | {None}}
        return JSONResponse(schema)

    async def docs(request: Request) -> Response:
        names = visible(request)
        if isinstance(names, PPSError):
            return refuse(names)
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - docs")

    app.add_route("/openapi.json", openapi_json, include_in_schema=False)
    app.add_route("/docs", docs, include_in_schema=False)

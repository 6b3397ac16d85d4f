"""``/openapi.json`` and ``/docs``: each caller sees only the entities it may call.

The document names every hosted entity in its paths, so a token-protected entity's routes appear only
to the holder of its token, and a tokenless entity's only to a request that passes its browser checks.

``/docs`` works in a browser with no network (issue 39): Swagger UI's own files come from the ``swagger-ui-py``
distribution installed beside this one (Apache-2.0; served under ``/docs/static/``, never from a CDN). The page
is a shell holding no entity's data; its script fetches ``/openapi.json`` with the token the user pastes (kept in
the tab's sessionStorage, sent as ``Authorization: Bearer``, also on "Try it out"). The memory explorer serves the
same page under its own path, authorised by its session cookie (:func:`docs_page`, :func:`openapi_for`).
"""

from __future__ import annotations

import copy
import html
import importlib.util
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, Response

from pps_core.errors import PPSError, Unauthorized

PUBLIC = ("/health", "/ready")
#: Where the page's files are served: Swagger UI's (from ``swagger-ui-py``) and this module's own script.
STATIC_PATH = "/docs/static"
SWAGGER_FILES = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
                 "favicon-32x32.png": "image/png", "LICENSE": "text/plain"}
OWN_FILES = {"pps-docs.js": "text/javascript", "pps-docs.css": "text/css"}
#: Scripts only from this server; Swagger UI sets styles from its script, hence style-src 'unsafe-inline'.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
           "Referrer-Policy": "no-referrer", "Cross-Origin-Resource-Policy": "same-origin"}


def swagger_files() -> Path:
    """The folder of Swagger UI's files, as the ``swagger-ui-py`` distribution installed them (not imported)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("swagger-ui-py is not installed: `pip install pps-http` brings it")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def docs_page(openapi_url: str, title: str) -> str:
    """The Swagger UI page for ``openapi_url`` (a same-origin path): a shell with no data, whose script fetches
    the document (with the pasted token, and the page's cookies) and renders its operations."""
    t, u, s = html.escape(title), html.escape(openapi_url), STATIC_PATH
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{t}</title>
<link rel="icon" href="{s}/favicon-32x32.png"><link rel="stylesheet" href="{s}/swagger-ui.css">
<link rel="stylesheet" href="{s}/pps-docs.css"></head>
<body><header class="pps-docs"><h1>{t}</h1>
<form id="pps-token"><p id="pps-why"></p>
<label>Token <input type="password" name="token" autocomplete="off" spellcheck="false"></label>
<button type="submit">Show the operations</button>
<p class="pps-hint"><code>pps token --entity NAME</code> prints it; it stays in this tab. Logged into the memory explorer?
Its API page (<code>/ui/NAME/api</code>) needs no token.</p></form></header>
<div id="swagger-ui" data-openapi="{u}"></div>
<script src="{s}/swagger-ui-bundle.js"></script><script src="{s}/pps-docs.js"></script>
</body></html>
"""


def openapi_for(app: FastAPI, names: set[str]) -> dict[str, Any]:
    """The app's OpenAPI document with the routes of the entities ``names`` (and the public ones) only."""
    schema = copy.copy(app.openapi())
    primary = getattr(app.state, "pps_primary", "")
    schema["paths"] = {p: v for p, v in schema["paths"].items() if _owner(p, primary) in names | {None}}
    return schema


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

    app.state.pps_primary = primary

    async def openapi_json(request: Request) -> Response:
        names = visible(request)
        if isinstance(names, PPSError):
            return refuse(names)
        return JSONResponse(openapi_for(app, names))

    async def docs(request: Request) -> Response:
        response = HTMLResponse(docs_page("/openapi.json", f"{app.title} - docs"))
        response.headers.update(HEADERS)
        return response

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name in SWAGGER_FILES:
            body, media = (swagger_files() / name).read_bytes(), SWAGGER_FILES[name]
        elif name in OWN_FILES:
            body, media = (Path(__file__).parent / "static" / name).read_bytes(), OWN_FILES[name]
        else:
            return JSONResponse({"error": "not_found", "message": "no such file"}, status_code=404)
        response = Response(body, media_type=media)
        response.headers.update(HEADERS)
        response.headers["Cache-Control"] = "public, max-age=3600"
        return response

    app.add_route("/openapi.json", openapi_json, include_in_schema=False)
    app.add_route("/docs", docs, include_in_schema=False)
    app.add_route(STATIC_PATH + "/{name}", static, include_in_schema=False)

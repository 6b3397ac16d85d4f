"""The explorer's ASGI app for one entity: routing, the login gate, CSRF on every POST, templates, headers.

Every page is built from the entity's operations (``await memory.call(name, params)``), so the explorer
shows whatever plugins the entity loads; a part whose operation is not loaded says so.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from pps_core.errors import PPSError, Unauthorized

from . import session as sec

log = logging.getLogger("pps.explorer")
STATIC = {"htmx.min.js": "text/javascript", "explorer.css": "text/css", "htmx.LICENSE": "text/plain"}


@dataclass
class Ctx:
    """One request: the entity's memory, the request, its session and the page's own values."""

    request: Request
    memory: Any
    base: str
    session: sec.Session | None
    notes: list[str] = field(default_factory=list)
    #: The explorer's object for this entity (:class:`~pps_explorer.plugin.ExplorerEntity`): what it recorded.
    plugin: Any = None

    def recall_latencies(self) -> list[tuple[str, float]]:
        """(UTC time, ms) of the newest ambient_recall calls in this process."""
        return self.plugin.recall_latencies() if self.plugin is not None else []

    def has(self, op: str) -> bool:
        return self.memory.catalog.get(op) is not None

    async def call(self, op: str, params: dict[str, Any] | None = None) -> Any:
        return await self.memory.call(op, params or {})

    async def part(self, op: str, params: dict[str, Any] | None = None) -> tuple[Any, str | None]:
        """(result, None), or (None, why this part is not shown): the operation is missing or failed."""
        if not self.has(op):
            return None, f"not available: this entity does not load the operation {op}"
        try:
            return await self.call(op, params), None
        except PPSError as exc:
            return None, f"{op}: {exc.message}"

    def arg(self, name: str, default: str = "") -> str:
        return (self.request.query_params.get(name) or default).strip()

    def int_arg(self, name: str, default: int = 0, lo: int = 0, hi: int = 1_000_000) -> int:
        try:
            return min(hi, max(lo, int(self.request.query_params.get(name, default))))
        except ValueError:
            return default

    def url(self, path: str = "", **query: Any) -> str:
        q = urlencode({k: v for k, v in query.items() if v not in (None, "")})
        return f"{self.base}{path}" + (f"?{q}" if q else "")


def _templates(memory):
    from jinja2 import Environment, PackageLoader, select_autoescape

    from . import text

    env = Environment(loader=PackageLoader("pps_explorer", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    tz = memory.tz  # every time on every page in the entity's zone

    def layer_name(name: str) -> str:
        layer = memory.layer(name)
        return text.layer_name(name, getattr(layer, "title", None))

    env.filters.update(md=text.markdown, highlight=text.highlight, short=text.short, urlq=lambda s: quote(str(s), safe=""),
                       local=lambda v, zone=False: text.local_time(v, tz, zone), layer_name=layer_name,
                       count_word=text.count_word, plural=text.plural)
    env.globals["zone"] = tz.key
    return env


def _shared_store(memory):
    """Where logins are kept for every server, when several serve the entity (``memory.shared``); else None."""
    from pps_core.contracts import SharedValues

    if not getattr(memory, "shared", False):
        return None
    found = memory.find(SharedValues)
    return found[0] if found else None


def _source(uri: str) -> list[str]:
    """The CSP source of a redirect URI's origin (``http://127.0.0.1:33418``, ``cursor:``), or none when it would
    not be a plain one."""
    import re

    parts = urlsplit(uri)
    if parts.scheme in ("http", "https") and re.fullmatch(r"[A-Za-z0-9.\-:\[\]]+", parts.netloc or ""):
        return [f"{parts.scheme}://{parts.netloc}"]
    if parts.scheme not in ("http", "https") and re.fullmatch(r"[a-z][a-z0-9+.\-]*", parts.scheme or ""):
        return [f"{parts.scheme}:"]
    return []


class Explorer:
    """Routes of ``/ui/<entity>``; ``pages`` maps a path to an async handler ``(ctx) -> (template, values)``."""

    def __init__(self, memory, auth, app=None, oauth=None, plugin=None) -> None:
        from . import pages

        self.memory = memory
        self.plugin = plugin
        self.auth = auth
        #: The entity's OAuth authorization server (``pps_http.oauth.EntityOAuth``), None without one: a logged-in
        #: owner approves MCP clients on ``/connect`` instead of pasting the token into its page.
        self.oauth = oauth
        #: The HTTP transport's app (its OpenAPI document): ``/api`` shows this entity's operations.
        self.http_app = app
        self.entity = memory.settings.entity
        self.base = f"/ui/{quote(self.entity, safe='')}"
        self.sessions = sec.Sessions(auth, self.base, _shared_store(memory))
        self.env = _templates(memory)
        routes = [Route("/", self.wrap(pages.home), methods=["GET"]),
                  Route("/login", self.login, methods=["GET", "POST"]),
                  Route("/logout", self.logout, methods=["POST"]),
                  Route("/connect", self.wrap(self.connect, come_back=True), methods=["GET", "POST"]),
                  Route("/static/{name}", self.static, methods=["GET"]),
                  Route("/api", self.wrap(self.api_page), methods=["GET"]),
                  Route("/openapi.json", self.wrap(self.openapi), methods=["GET"])]
        for path, handler, methods in pages.routes():
            routes.append(Route(path, self.wrap(handler), methods=methods))
        self.app = Starlette(routes=routes, exception_handlers={404: self.not_found, 405: self.not_found})
        if oauth is not None:
            oauth.offer_approval("memory explorer", f"{self.base}/connect?request={{request}}")

    # -- plumbing -------------------------------------------------------------------------------

    def render(self, ctx: Ctx | None, template: str, values: dict[str, Any], status: int = 200) -> HTMLResponse:
        page = self.env.get_template(template).render(
            entity=self.entity, base=self.base, csrf=ctx.session.csrf if ctx and ctx.session else "",
            login=self.auth.required, path=ctx.request.url.path if ctx else "", notes=ctx.notes if ctx else [],
            **values)
        return self.headers(HTMLResponse(page, status_code=status))

    @staticmethod
    def headers(response: Response) -> Response:
        own = response.headers.get("content-security-policy")
        response.headers.update(sec.HEADERS)
        if own:  # a page that says its own policy (the API docs: Swagger UI sets styles from its script)
            response.headers["content-security-policy"] = own
        return response

    # -- the entity's API, in Swagger UI (the HTTP transport's /docs page, authorised by this session) --------

    async def api_page(self, ctx: Ctx) -> Response:
        from pps_http.docs import HEADERS, docs_page

        if self.http_app is None:
            return self.error(ctx, 404, "no HTTP API is served beside these pages")
        response = HTMLResponse(docs_page(f"{self.base}/openapi.json", f"{self.entity}: API"))
        response.headers.update(HEADERS)
        return response

    async def openapi(self, ctx: Ctx) -> Response:
        from pps_http.docs import openapi_for
        from starlette.responses import JSONResponse

        if self.http_app is None:
            return self.error(ctx, 404, "no HTTP API is served beside these pages")
        return JSONResponse(openapi_for(self.http_app, {self.entity}))

    def _gate(self, request: Request) -> tuple[sec.Session | None, bool]:
        """(session, by_bearer). Raises PPSError when the request may not see the pages."""
        if not self.auth.required:  # the transport's rule: Host and Origin exactly this server's loopback
            self.auth.check_scope(request.scope)
        if sec.check_bearer(self.auth, request.headers.get("authorization"), request.headers.get("origin")):
            return None, True
        session = self.sessions.get(request.cookies.get(sec.COOKIE))
        if session is None and self.auth.required:
            raise Unauthorized("log in with the entity's token")
        return session, False

    def wrap(self, handler, *, come_back: bool = False):
        """``come_back``: a GET that must log in first returns to this page after the login (``?next=``)."""

        async def endpoint(request: Request) -> Response:
            new_cookie = None
            try:
                await self.sessions.load(request.cookies.get(sec.COOKIE))
                session, by_bearer = self._gate(request)
            except Unauthorized as exc:
                if request.headers.get("authorization"):  # a script's wrong bearer token: 401, said plainly
                    return self.error(None, 401, exc.message)
                if request.method == "GET":
                    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    back = f"?next={quote(here, safe='')}" if come_back and self._back(here) == here else ""
                    return self.headers(RedirectResponse(f"{self.base}/login{back}", status_code=303))
                return self.error(None, 401, "log in first (your session ended)")
            except PPSError as exc:
                return self.error(None, exc.status, exc.message)
            if session is None and not by_bearer:  # an entity without a token: a session for CSRF only
                sid, session = self.sessions.create(None)
                new_cookie = self.sessions.cookie(sec.COOKIE, sid, secure=request.url.scheme == "https")
            ctx = Ctx(request, self.memory, self.base, session, plugin=self.plugin)
            try:
                if request.method == "POST" and not by_bearer:
                    form = await request.form()
                    sec.check_csrf(session, form.get("csrf") or request.headers.get("x-csrf-token"))
                started = time.perf_counter()
                out = await handler(ctx)
                if isinstance(out, Response):
                    response = self.headers(out)
                else:
                    template, values = out
                    response = self.render(ctx, template, values)
                response.headers["Server-Timing"] = f"page;dur={(time.perf_counter() - started) * 1000:.2f}"
            except PPSError as exc:
                response = self.error(ctx, exc.status, exc.message)
            except Exception as exc:  # a bug: the log gets the traceback, the page a plain message
                log.exception("explorer page %s failed", request.url.path)
                response = self.error(ctx, 500, f"this page failed ({type(exc).__name__}); see the server log")
            if new_cookie:
                response.headers.append("set-cookie", new_cookie)
            return response

        return endpoint

    async def not_found(self, request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        return self.error(None, status, "no such page" if status == 404 else "this page does not take that method")

    def error(self, ctx: Ctx | None, status: int, message: str) -> HTMLResponse:
        return self.render(ctx, "error.html", {"status": status, "message": message}, status=status)

    # -- login ----------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        secure = request.url.scheme == "https"
        if not self.auth.required:
            return self.headers(RedirectResponse(f"{self.base}/", status_code=303))
        if request.method == "GET":
            nonce = secrets.token_urlsafe(32)
            back = self._back(request.query_params.get("next"))
            response = self.render(None, "login.html", {"nonce": nonce, "message": "",
                                                        "next": back if back != f"{self.base}/" else ""})
            response.headers.append("set-cookie", self.sessions.cookie(sec.LOGIN_COOKIE, nonce, secure=secure,
                                                                       max_age=3600))
            return response
        form = await request.form()
        nonce = request.cookies.get(sec.LOGIN_COOKIE)
        back = self._back(form.get("next"))
        try:
            if not nonce or not form.get("nonce"):
                raise Unauthorized("the login form is stale; reload it")
            sec.check_csrf(sec.Session(csrf=nonce, token_sha=None), str(form.get("nonce")))
            sid, _session = self.sessions.login(str(form.get("token") or ""), request.headers.get("origin"))
            await self.sessions.publish(sid)
        except PPSError as exc:
            response = self.render(None, "login.html", {"nonce": nonce or "", "message": exc.message,
                                                        "next": back if back != f"{self.base}/" else ""},
                                   status=exc.status)
            return response
        response = self.headers(RedirectResponse(back, status_code=303))
        response.headers.append("set-cookie", self.sessions.cookie(sec.COOKIE, sid, secure=secure))
        response.headers.append("set-cookie", self.sessions.cookie(sec.LOGIN_COOKIE, "", secure=secure, max_age=0))
        return response

    def _back(self, value: Any) -> str:
        """Where a login returns: ``value`` when it is a path of these pages (no other site, entity or folder:
        no scheme, no ``//``, ``\\``, ``..`` or encoded dot or slash), else the home page."""
        home = f"{self.base}/"
        text = value if isinstance(value, str) else ""
        path = urlsplit(text).path.lower()
        if (not text.startswith(home) or "//" in text or "\\" in text or ".." in path
                or any(code in path for code in ("%2e", "%2f", "%5c")) or any(c < " " for c in text)):
            return home
        return text

    # -- OAuth: a client approved with this login (issue 41) ---------------------------------------------

    async def connect(self, ctx: Ctx) -> Response | tuple[str, dict[str, Any]]:
        """The owner, logged in here, approves (or denies) an MCP client waiting at the entity's authorization
        server: the client's name is its own registration (shown as text), the answer sends the browser back."""
        from starlette.responses import RedirectResponse as Redirect

        if self.oauth is None:
            return self.error(ctx, 404, "this entity has no OAuth authorization server (no token, or the server "
                                        "was started with --no-oauth)")
        expired = "this approval request is unknown or expired; start connecting again from your client"
        if ctx.request.method == "POST":
            form = await ctx.request.form()
            request_id = str(form.get("request") or "")
            try:
                url = (self.oauth.deny(request_id) if form.get("decision") == "deny"
                       else self.oauth.approve(request_id))
            except LookupError:
                return self.error(ctx, 400, expired)
            return Redirect(url, status_code=303, headers={"Cache-Control": "no-store"})
        request_id = ctx.arg("request")
        waiting = self.oauth.waiting(request_id)
        if waiting is None:
            return self.error(ctx, 400, expired)
        response = self.render(ctx, "connect.html", {"waiting": waiting, "request_id": request_id})
        # the form's answer is a redirect to the client: the policy lets the form go there (and nowhere else)
        response.headers["content-security-policy"] = sec.CSP.replace(
            "form-action 'self'", " ".join(["form-action 'self'", *_source(waiting["redirect_uri"])]))
        return response

    async def logout(self, request: Request) -> Response:
        await self.sessions.load(request.cookies.get(sec.COOKIE))
        try:
            self._gate(request)
        except Unauthorized:
            pass
        except PPSError as exc:
            return self.error(None, exc.status, exc.message)
        sid = request.cookies.get(sec.COOKIE)
        session = self.sessions.get(sid)
        form = await request.form()
        if session is not None:
            try:
                sec.check_csrf(session, form.get("csrf"))
            except PPSError as exc:
                return self.error(None, exc.status, exc.message)
            await self.sessions.end(sid)
        response = self.headers(RedirectResponse(f"{self.base}/login", status_code=303))
        response.headers.append("set-cookie", self.sessions.cookie(sec.COOKIE, "", secure=False, max_age=0))
        return response

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return self.headers(Response("not found", status_code=404, media_type="text/plain"))
        body = (files("pps_explorer") / "static" / name).read_bytes()
        response = Response(body, media_type=STATIC[name])
        response.headers.update(sec.HEADERS)
        response.headers["Cache-Control"] = "public, max-age=3600"
        return response

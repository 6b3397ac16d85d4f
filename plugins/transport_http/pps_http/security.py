"""Bearer tokens per entity, and the request-size limit, as small pieces of ASGI.

Tokens are compared in constant time and never logged; a token is re-read when its file changes,
so ``pps_regenerate_token`` takes effect at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pps_core.auth import TokenGate
from pps_core.errors import Forbidden, InvalidToken, PPSError, TooLarge, Unauthorized
from pps_core.reach import Caller

__all__ = ["BearerGuard", "BodyLimit", "EntityAuth", "FoldHost", "InvalidToken", "challenge", "is_loopback"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """A bind address on this machine only: a loopback IP literal (127.0.0.0/8, ::1) or ``localhost``."""
    import ipaddress

    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_names(port: int | None, scheme: str = "") -> set[str]:
    """The exact Host values (or, with ``scheme``, Origin values) that name this server on loopback."""
    if port is None:
        return set()
    prefix = f"{scheme}://" if scheme else ""
    names = {f"{prefix}{h}:{port}" for h in LOOPBACK_NAMES}
    if port == (443 if scheme == "https" else 80):
        names |= {f"{prefix}{h}" for h in LOOPBACK_NAMES}
    return names


def browser_problem(origin: str | None, host: str | None, port: int | None) -> str | None:
    """Why a request may have been sent by a web page other than this server's own, or None.

    Without a token the only guard of an entity is the loopback bind, and a page in a local browser
    reaches loopback too: by a cross-site request (its ``Origin`` names the page) or by DNS rebinding
    (its ``Host`` names the attacker's domain, which now resolves to 127.0.0.1). So both must be exactly
    this server: scheme, loopback name and port. Prefix tests ("starts with 127.") let
    ``http://127.0.0.1.nip.io`` through. ``port`` is the port the connection arrived on (the ASGI
    ``server``); a client without a browser sends no Origin and the Host it dialled.
    """
    if host is not None and not _is_local(host.lower(), port, ""):
        return f"Host {host!r} is not this server's loopback address"
    if origin is not None and not _is_local(origin.lower(), port, "http"):
        return f"requests from web pages ({origin}) are refused"
    return None


def _is_local(value: str, port: int | None, scheme: str) -> bool:
    if port is not None:
        return value in local_names(port, scheme)
    # The port is unknown (a caller of ``check`` that passed no ``port``): the name must still be exactly a
    # loopback name, any port. ``check_scope`` always knows the port.
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value if scheme else f"//{value}")
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return False
    return (parts.scheme == scheme and parts.hostname in ("127.0.0.1", "localhost", "::1")
            and not parts.username and not parts.path and not parts.query and not parts.fragment)


def scope_site(scope) -> tuple[str | None, str | None, int | None]:
    """(Origin, Host, the port the request arrived on) of an ASGI HTTP scope."""
    server = scope.get("server") or (None, None)
    return _header(scope, b"origin"), _header(scope, b"host"), server[1]


class EntityAuth:
    """Who may call one entity over HTTP: the kernel's token gate (:class:`pps_core.auth.TokenGate`), plus what
    only HTTP needs, the ``Authorization`` header and, for an entity without a token, the browser rule."""

    def __init__(self, entity: str, home: Path, gate: TokenGate | None = None) -> None:
        self.entity = entity
        self.gate = gate or TokenGate(entity, home)
        self.path = self.gate.path

    @property
    def required(self) -> bool:
        """Decided at start: a server that started with a token never silently drops auth."""
        return self.gate.required

    def current(self) -> str | None:
        return self.gate.current()

    def caller(self, authorization: str | None, *, origin: str | None = None, host: str | None = None,
               port: int | None = None) -> Caller:
        """The caller a request presents (its bearer token), for the kernel to check. Raises Forbidden for an
        entity without a token when a web page may have sent the request (see ``browser_problem``), and
        Unauthorized for an Authorization header that is not a bearer token."""
        if not self.required:
            problem = browser_problem(origin, host, port)
            if problem:
                raise Forbidden(f"entity {self.entity!r} has no token, so {problem}; give it one with `pps init`")
            return Caller(via="http")
        if not authorization:
            return Caller(via="http")
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise Unauthorized("use 'Authorization: Bearer <token>'")
        return Caller(token=presented.strip(), via="http")

    def check(self, authorization: str | None, *, sensitive: bool = False, origin: str | None = None,
              host: str | None = None, port: int | None = None) -> None:
        """Raise Unauthorized (no token presented), InvalidToken (not this entity's) or Forbidden (an entity
        without a token: a request a web page may have sent, or a sensitive operation)."""
        caller = self.caller(authorization, origin=origin, host=host, port=port)
        self.gate.check(caller.token, sensitive=sensitive)

    def caller_of(self, scope) -> Caller:
        """``caller`` for an ASGI HTTP scope."""
        origin, host, port = scope_site(scope)
        return self.caller(_header(scope, b"authorization"), origin=origin, host=host, port=port)

    def check_scope(self, scope, *, sensitive: bool = False) -> None:
        """``check`` for an ASGI HTTP scope (a Starlette ``request.scope``): what every route of an entity
        calls, REST, MCP or a page mounted into the app."""
        self.gate.check(self.caller_of(scope).token, sensitive=sensitive)


def challenge(exc: PPSError) -> str | None:
    """The ``WWW-Authenticate`` value for a 401 (RFC 6750 section 3), None for any other answer."""
    if exc.status != 401:
        return None
    return 'Bearer realm="pps", error="invalid_token"' if isinstance(exc, InvalidToken) else 'Bearer realm="pps"'


async def send_error(send, exc: PPSError, *, jsonrpc: bool = False) -> None:
    """The catalog's error body; on an MCP endpoint (``jsonrpc``) wrapped as a JSON-RPC error whose ``data`` is
    that body, so an MCP client reads why (the SDK reads a JSON-RPC error at any status)."""
    payload: dict = exc.to_dict()
    if jsonrpc:
        payload = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": exc.message, "data": payload}}
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    value = challenge(exc)
    if value:
        headers.append((b"www-authenticate", value.encode()))
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


class BearerGuard:
    """Wraps an ASGI app (the MCP endpoint) so only the entity's token reaches it."""

    def __init__(self, app, auth: EntityAuth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            try:
                self.auth.check_scope(scope)
            except PPSError as exc:
                await send_error(send, exc)
                return
        await self.app(scope, receive, send)


class FoldHost:
    """Wraps the MCP endpoint so it sees ``Host`` and ``Origin`` lowercased, as :func:`browser_problem` reads them:
    a host name and a scheme are case-insensitive (RFC 3986 section 3.2.2), and the MCP SDK's DNS-rebinding check
    compares them exactly, so ``Host: LOCALHOST:<port>`` was a 421 there and a 200 on the REST routes (issue 35).
    Nothing else changes: a look-alike name (``localhost.``, ``127.0.0.1.nip.io``) is refused on both."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers = [(k, v.lower()) if k in (b"host", b"origin") else (k, v) for k, v in scope.get("headers", ())]
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuses request bodies over the limit (413) before any handler reads them."""

    def __init__(self, app, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _header(scope, b"content-length")
        too_large = TooLarge(f"request body over {limit} bytes (limits.max_request_bytes)")
        rpc = scope["path"].rstrip("/").endswith("/mcp")
        if declared and declared.isdigit() and int(declared) > limit:
            await send_error(send, too_large, jsonrpc=rpc)
            return
        chunks, total = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > limit:
                await send_error(send, too_large, jsonrpc=rpc)
                return
            chunks.append(body)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

"""Bearer tokens per entity, and the request-size limit, as small pieces of ASGI.

Tokens are compared in constant time and never logged; a token is re-read when its file changes,
so ``pps_regenerate_token`` takes effect at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from pps_core.auth import check_token, token_path
from pps_core.errors import Forbidden, PPSError, TooLarge, Unauthorized

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def loopback_origin(origin: str) -> bool:
    from urllib.parse import urlsplit

    try:
        host = urlsplit(origin).hostname or ""
    except ValueError:
        return False
    return is_loopback(host)


class EntityAuth:
    """Who may call one entity: the holder of its token (or anyone on loopback if it has none)."""

    def __init__(self, entity: str, home: Path) -> None:
        self.entity = entity
        self.path = token_path(home)
        self._stamp: tuple | None = None
        self._token: str | None = None
        #: Decided at start: a server that started with a token never silently drops auth.
        self.required = self.current() is not None

    def current(self) -> str | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._token = None, None
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._token = self.path.read_text().strip() or None
            self._stamp = stamp
        return self._token

    def check(self, authorization: str | None, *, sensitive: bool = False, origin: str | None = None) -> None:
        """Raise Unauthorized (no token presented) or Forbidden (not this entity's token).

        Without a token, the only guard is the loopback bind, and a web page in a local browser is on
        loopback too: a request a browser sent from a non-loopback page (its Origin) is refused.
        """
        if not self.required:
            if origin and not loopback_origin(origin):
                raise Forbidden(f"entity {self.entity!r} has no token, so requests from web pages ({origin}) "
                                "are refused; give it one with `pps init`")
            if sensitive:
                raise Forbidden(f"entity {self.entity!r} has no token: this operation needs one (run `pps init`)")
            return
        if not authorization:
            raise Unauthorized(f"entity {self.entity!r} needs 'Authorization: Bearer <token>' (see `pps token`)")
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise Unauthorized("use 'Authorization: Bearer <token>'")
        if not check_token(self.current(), presented.strip()):
            raise Forbidden(f"this token does not grant access to entity {self.entity!r}")


async def send_error(send, exc: PPSError) -> None:
    body = json.dumps(exc.to_dict()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if exc.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="pps"'))
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
                self.auth.check(_header(scope, b"authorization"), origin=_header(scope, b"origin"))
            except PPSError as exc:
                await send_error(send, exc)
                return
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
        if declared and declared.isdigit() and int(declared) > limit:
            await send_error(send, too_large)
            return
        chunks, total = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > limit:
                await send_error(send, too_large)
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

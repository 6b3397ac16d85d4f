"""Who is looking: a login that trades the entity's token for a session cookie, CSRF tokens, security headers.

The cookie holds a random session id, never the token (HttpOnly, SameSite=Strict, scoped to the entity's
pages). A session ends when the token is rotated. ``Authorization: Bearer <token>`` also works (scripts,
benchmarks); such requests carry no ambient credential, so they need no CSRF token. An entity without a
token follows the HTTP transport's rule (``EntityAuth.check_scope``: the Host and any Origin must be
exactly this server's loopback address and port, which also turns away a DNS-rebinding page).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field

from pps_http.security import EntityAuth

from pps_core.auth import token_digest
from pps_core.errors import Forbidden, PPSError, Unauthorized

COOKIE = "pps_ui_session"
LOGIN_COOKIE = "pps_ui_login"
IDLE_S = 12 * 3600
MAX_SESSIONS = 256

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
           "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Resource-Policy": "same-origin"}


@dataclass
class Session:
    csrf: str
    token_sha: str | None  # the digest of the token it logged in with (None: an entity without a token)
    seen: float = field(default_factory=time.monotonic)


#: A session kept in the store several servers share (``pps_core.contracts.SharedValues``): under the digest of its
#: id (the cookie's value is never stored), with its CSRF token, its token's digest and when it ends.
SHARED_PREFIX = "explorer-session:"


class Sessions:
    """Sessions of one entity's pages, in this process's memory (a restart asks to log in again); where several
    servers serve the entity (``shared``: a :class:`pps_core.contracts.SharedValues` store), logins are kept in
    the store too, so a login works on every server and a logout ends it on all of them."""

    def __init__(self, auth: EntityAuth, path: str, shared=None) -> None:
        self.auth = auth
        self.path = path
        self.shared = shared
        self._by_id: dict[str, Session] = {}

    @staticmethod
    def _key(sid: str) -> str:
        return SHARED_PREFIX + hashlib.sha256(sid.encode()).hexdigest()

    async def load(self, sid: str | None) -> None:
        """Before :meth:`get`, where logins are shared: take the session as the store has it now (made on another
        server, or ended there)."""
        if self.shared is None or not sid:
            return
        raw = await self.shared.shared_get(self._key(sid))
        record = json.loads(raw) if raw else None
        if not isinstance(record, dict) or record.get("until", 0) < time.time():
            self._by_id.pop(sid, None)
            return
        if sid not in self._by_id:
            self._by_id[sid] = Session(csrf=str(record["csrf"]), token_sha=record.get("token_sha"))

    async def publish(self, sid: str) -> None:
        """A login made here, for every server (where logins are shared); the logins that ended or expired are
        removed from the store then (where it can forget values), so they do not pile up."""
        from pps_core.contracts import PrunableSharedValues

        session = self._by_id.get(sid)
        if self.shared is not None and session is not None:
            await self.shared.shared_put(self._key(sid), json.dumps(
                {"csrf": session.csrf, "token_sha": session.token_sha, "until": time.time() + IDLE_S}))
            if isinstance(self.shared, PrunableSharedValues):
                await self.shared.shared_prune(SHARED_PREFIX, IDLE_S)

    async def end(self, sid: str | None) -> None:
        """Log out, here and (where logins are shared) on every server."""
        self.drop(sid)
        if self.shared is not None and sid:
            await self.shared.shared_put(self._key(sid), "")

    def create(self, token: str | None) -> tuple[str, Session]:
        now = time.monotonic()
        for sid in [s for s, v in self._by_id.items() if now - v.seen > IDLE_S]:
            del self._by_id[sid]
        while len(self._by_id) >= MAX_SESSIONS:
            del self._by_id[next(iter(self._by_id))]
        sid = secrets.token_urlsafe(32)
        self._by_id[sid] = session = Session(csrf=secrets.token_urlsafe(32),
                                             token_sha=token_digest(token) if token else None)
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        session = self._by_id.get(sid or "")
        if session is None:
            return None
        now = time.monotonic()
        stale = now - session.seen > IDLE_S
        rotated = self.auth.required and not self.auth.gate.accepts_digest(session.token_sha)  # here or elsewhere
        if stale or rotated or (session.token_sha is None and self.auth.required):
            self._by_id.pop(sid, None)
            return None
        session.seen = now
        return session

    def drop(self, sid: str | None) -> None:
        self._by_id.pop(sid or "", None)

    def login(self, presented: str, origin: str | None) -> tuple[str, Session]:
        """Check a token typed into the login form (as a bearer token would be checked)."""
        presented = presented.strip()
        if not presented:
            raise Unauthorized("enter the entity's token (`pps token --entity NAME` prints it)")
        self.auth.check(f"Bearer {presented}", origin=origin)
        return self.create(presented)

    def cookie(self, name: str, value: str, *, secure: bool, max_age: int | None = IDLE_S) -> str:
        parts = [f"{name}={value}", f"Path={self.path}", "HttpOnly", "SameSite=Strict"]
        if max_age is not None:
            parts.append(f"Max-Age={max_age}")
        if secure:
            parts.append("Secure")
        return "; ".join(parts)


def check_csrf(session: Session, presented: str | None) -> None:
    if not presented or not hmac.compare_digest(session.csrf.encode(), presented.encode()):
        raise Forbidden("the form is stale or did not come from these pages (CSRF token missing or wrong); "
                        "reload the page and try again")


def check_bearer(auth: EntityAuth, authorization: str | None, origin: str | None) -> bool:
    """True if the request carries a valid bearer token; raises if it carries a wrong one."""
    if not authorization:
        return False
    if not auth.required:  # nothing to check beyond the loopback rule the gate applied
        return True
    auth.check(authorization, origin=origin)
    return True


__all__ = ["COOKIE", "CSP", "HEADERS", "LOGIN_COOKIE", "PPSError", "Session", "Sessions", "check_bearer",
           "check_csrf"]

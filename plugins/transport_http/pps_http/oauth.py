"""OAuth for an entity's MCP endpoint (the MCP authorization spec), so claude.ai / Claude Desktop can add it as a
connector: protected-resource metadata (RFC 9728), an authorization server per entity (authorization code with
PKCE, dynamic client registration, refresh, revocation) built from the ``mcp`` SDK's ``mcp.server.auth``, and the
SDK's bearer middleware in front of the endpoint, which also admits the entity's static token as before.

The entity's owner approves a client once, on a small page that asks for the entity's token, or on a page plugin's
own page with its own login (the memory explorer's session: :meth:`EntityOAuth.offer_approval`, :meth:`waiting`,
:meth:`approve`, :meth:`deny`; the token page links to it). Each entity has its
own authorization server and its own state (``<home>/credentials/oauth.json``, 0600, atomic writes; the kernel's
folder of live credentials, which backups leave out): a token issued for one
entity is unknown to every other. An entity several servers serve keeps that state, and the approval pages
waiting for an answer, in the store they share instead (:class:`SharedRecords`), so any server goes on where
another left off. Client secrets, codes, access and refresh tokens are stored as SHA-256 hashes
only (they are random, 256 bits). Only entities that have a token get OAuth: an entity without one is open on
loopback and has nothing to approve with.
"""

from __future__ import annotations

import hmac
import html
import json
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import (
    REVOCATION_PATH,
    TOKEN_PATH,
    build_metadata,
    build_resource_metadata_url,
    cors_middleware,
    create_auth_routes,
    create_protected_resource_routes,
)
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from pps_core.auth import TokenGate

from .oauth_records import (
    ACCESS_TTL_S,
    CODE_TTL_S,
    PENDING_TTL_S,
    REFRESH_TTL_S,
    FileRecords,
    OAuthStore,
    SharedRecords,
    _hash,
)

__all__ = ["ACCESS_TTL_S", "CODE_TTL_S", "REFRESH_TTL_S", "EntityOAuth", "OAuthStore", "SharedRecords"]

CSRF_COOKIE = "pps_oauth_csrf"
STATIC_CLIENT = "pps-token"  # the client id the static bearer token is reported under


class _Provider:
    """The SDK's ``OAuthAuthorizationServerProvider`` for one entity, over its records (:class:`FileRecords`, or
    :class:`SharedRecords` where several servers serve the entity)."""

    def __init__(self, oauth: EntityOAuth) -> None:
        self.oauth = oauth
        self._records: FileRecords | SharedRecords | None = None

    @property
    def records(self) -> FileRecords | SharedRecords:
        if self._records is None:
            values, claims = self.oauth.shared() if self.oauth.shared else (None, None)
            self._records = SharedRecords(values, claims) if values is not None else FileRecords(self.oauth.store)
        return self._records

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        stored = await self.records.client(client_id)
        return OAuthClientInformationFull.model_validate(stored["info"]) if stored else None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        info = client_info.model_dump(mode="json")
        if info.get("client_secret"):  # the client was told its secret; only its hash is kept
            info["client_secret"] = _hash(info["client_secret"])
        await self.records.register(str(client_info.client_id), info)

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource and not self.oauth.is_resource(params.resource):
            raise AuthorizeError("invalid_target", f"this server grants tokens for {self.oauth.resources[0]}")
        request_id = secrets.token_urlsafe(32)
        await self.records.put("pending", request_id, {"client_id": client.client_id,
                                                       "params": params.model_dump(mode="json"),
                                                       "expires_at": time.time() + PENDING_TTL_S})
        return f"{self.oauth.issuer}/approve?request={request_id}"

    async def waiting(self, request_id: str) -> tuple[str, AuthorizationParams] | None:
        waiting = await self.records.get("pending", request_id) if request_id else None
        if not waiting:
            return None
        return waiting["client_id"], AuthorizationParams.model_validate(waiting["params"])

    async def answer(self, request_id: str) -> tuple[str, AuthorizationParams]:
        """The waiting request, taken (once, on any server); ``LookupError`` when unknown or expired."""
        waiting = await self.records.take("pending", request_id) if request_id else None
        if not waiting:
            raise LookupError("this approval request is unknown or expired")
        return waiting["client_id"], AuthorizationParams.model_validate(waiting["params"])

    async def approve(self, request_id: str) -> str:
        """The owner said yes: a code for the waiting client, and the URL to send the browser back to."""
        client_id, params = await self.answer(request_id)
        code = secrets.token_urlsafe(32)
        record = {"client_id": client_id, "scopes": params.scopes or [],
                  "expires_at": time.time() + CODE_TTL_S, "code_challenge": params.code_challenge,
                  "redirect_uri": str(params.redirect_uri),
                  "redirect_uri_provided_explicitly": params.redirect_uri_provided_explicitly,
                  "resource": params.resource or self.oauth.resources[0], "owner": self._owner()}
        await self.records.put("codes", _hash(code), record)
        await self.records.approved(client_id)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull,
                                      authorization_code: str) -> AuthorizationCode | None:
        stored = await self.records.get("codes", _hash(authorization_code))
        if not stored or stored["client_id"] != client.client_id or not self._current(stored):
            return None
        stored.pop("owner", None)
        return AuthorizationCode(code=authorization_code, **stored)

    def _owner(self) -> str:
        """Which of the entity's tokens approved a grant (its hash): rotating the token ends every grant it
        approved, as it ends the explorer's sessions, so a leaked token's grants do not outlive it."""
        return _hash(self.oauth.gate.current() or "")

    def _current(self, stored: dict | None) -> bool:
        return bool(stored) and hmac.compare_digest(str(stored.get("owner", "")).encode(),  # type: ignore[union-attr]
                                                    self._owner().encode())

    async def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        grant = secrets.token_hex(8)
        now = int(time.time())
        common = {"client_id": client_id, "scopes": scopes, "resource": resource, "grant": grant,
                  "owner": self._owner()}
        await self.records.new_grant(grant)
        await self.records.put("access", _hash(access), {**common, "expires_at": now + ACCESS_TTL_S})
        await self.records.put("refresh", _hash(refresh), {**common, "expires_at": now + REFRESH_TTL_S})
        await self.records.approved(client_id)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=ACCESS_TTL_S,
                          refresh_token=refresh, scope=" ".join(scopes) or None)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: AuthorizationCode) -> OAuthToken:
        if await self.records.take("codes", _hash(authorization_code.code)) is None:  # single use, fleet-wide
            raise TokenError("invalid_grant", "authorization code already used")
        return await self._issue(str(client.client_id), authorization_code.scopes, authorization_code.resource)

    async def _live(self, kind: str, token: str) -> dict[str, Any] | None:
        stored = await self.records.get(kind, _hash(token))
        if (not stored or stored["expires_at"] < time.time() or not self._current(stored)
                or not await self.records.grant_alive(stored.get("grant"))):
            return None
        return stored

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        stored = await self._live("refresh", refresh_token)
        if not stored or stored["client_id"] != client.client_id:
            return None
        return RefreshToken(token=refresh_token, client_id=stored["client_id"], scopes=stored["scopes"],
                            expires_at=stored["expires_at"], resource=stored.get("resource"))

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        old = await self.records.take("refresh", _hash(refresh_token.token))
        if old is None:
            raise TokenError("invalid_grant", "refresh token already used")
        await self.records.drop_grant(old["grant"])
        return await self._issue(str(client.client_id), scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        stored = await self._live("access", token)
        if not stored:
            return None
        return AccessToken(token=token, client_id=stored["client_id"], scopes=stored["scopes"],
                           expires_at=stored["expires_at"], resource=stored.get("resource"))

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        kind = "refresh" if isinstance(token, RefreshToken) else "access"
        stored = await self.records.get(kind, _hash(token.token))
        if stored:  # the access token and the refresh token of the same grant both go
            await self.records.drop_grant(stored["grant"])

    async def exchange_identity_assertion(self, client, params) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "not supported")


class _PresentedSecret:
    """What the SDK's client authenticator sees of a client: the stored secret is a hash, so the client is shown
    with the secret it presented when that hashes to the stored one, and with a random one otherwise."""

    def __init__(self, provider: _Provider, presented: str | None) -> None:
        self.provider = provider
        self.presented = presented

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        client = await self.provider.get_client(client_id)
        if client is None or not client.client_secret:
            return client
        matches = self.presented is not None and hmac.compare_digest(_hash(self.presented).encode(),
                                                                      client.client_secret.encode())
        return client.model_copy(update={"client_secret": self.presented if matches else secrets.token_hex(32)})


class _Authenticator(ClientAuthenticator):
    """The SDK's ``ClientAuthenticator`` over hashed client secrets (see :class:`_PresentedSecret`)."""

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        presented = form.get("client_secret")
        header = request.headers.get("authorization", "")
        if header[:6].lower() == "basic ":
            import base64
            import binascii
            from urllib.parse import unquote

            try:
                presented = unquote(base64.b64decode(header[6:]).decode().partition(":")[2])
            except (ValueError, UnicodeDecodeError, binascii.Error):
                presented = None  # the SDK answers the malformed header itself
        view = _PresentedSecret(self.provider, presented if isinstance(presented, str) else None)  # type: ignore[arg-type]
        return await ClientAuthenticator(view).authenticate_request(request)  # type: ignore[arg-type]


class _NotSensitive:
    """A client holding an OAuth grant calls the entity's tools, but not its sensitive operations (rotating the
    token): those stay with the holder of the token itself, as on every other transport."""

    def __init__(self, app, sensitive: Callable[[], set[str]]) -> None:
        self.app = app
        self.sensitive = sensitive

    async def __call__(self, scope, receive, send) -> None:
        user = scope.get("user")
        granted = getattr(getattr(user, "access_token", None), "client_id", STATIC_CLIENT) != STATIC_CLIENT
        if scope["type"] != "http" or scope.get("method") != "POST" or not granted:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:  # BodyLimit has read and capped it already
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            parsed = None  # the MCP server answers a malformed body itself
        names = {m.get("params", {}).get("name") for m in (parsed if isinstance(parsed, list) else [parsed])
                 if isinstance(m, dict) and m.get("method") == "tools/call" and isinstance(m.get("params"), dict)}
        refused = names & self.sensitive()
        if refused:
            await _refuse(send, parsed, sorted(refused)[0])
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _refuse(send, message: Any, name: str) -> None:
    """The tool result the kernel gives a caller it refuses (``is_error``, the model reads why), or, for a batch,
    the JSON-RPC error every transport gives (403)."""
    from pps_mcp.server import error_result

    from pps_core.errors import Forbidden

    from .security import send_error

    exc = Forbidden(f"{name} needs the entity's token itself, not an OAuth grant")
    if not isinstance(message, dict):
        await send_error(send, exc, jsonrpc=True)
        return
    result = error_result(exc).model_dump(mode="json", by_alias=True, exclude_none=True)
    body = json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": result}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class _Verifier:
    """The SDK's ``TokenVerifier``: an access token this entity's server issued, or the entity's static token."""

    def __init__(self, provider: _Provider, gate: TokenGate) -> None:
        self.provider = provider
        self.gate = gate

    async def verify_token(self, token: str) -> AccessToken | None:
        if self.gate.accepts(token):  # the fleet's token where several servers serve the entity
            return AccessToken(token=token, client_id=STATIC_CLIENT, scopes=[])
        return await self.provider.load_access_token(token)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Connect to {entity}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem}}
input[type=password]{{width:100%;padding:.5rem;font:inherit}}button{{padding:.5rem 1rem;font:inherit}}
.err{{color:#b00}}code{{word-break:break-all}}</style></head><body>
<h1>Connect {client} to {entity}?</h1>
<p><strong>{client}</strong> asks to use the memory of entity <strong>{entity}</strong> through MCP
(read and write). Approving sends you back to <code>{redirect}</code>.</p>
{error}<form method="post" action="approve">
<input type="hidden" name="request" value="{request}"><input type="hidden" name="csrf" value="{csrf}">
<label>The entity's token (<code>pps token --entity {entity}</code>)<br>
<input type="password" name="token" autocomplete="current-password" required autofocus></label>
<p><button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button></p>
</form>{elsewhere}</body></html>"""

_HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                       "frame-ancestors 'none'; base-uri 'none'"}


class EntityOAuth:
    """OAuth for one entity: its routes, and the guard for its MCP endpoint(s).

    ``base`` is the server's public URL (``http://127.0.0.1:8765``, or what ``--public-url`` says), ``mcp_paths``
    the entity's MCP endpoint paths (``/entities/<name>/mcp``, plus ``/mcp`` for the primary entity).
    """

    def __init__(self, entity: str, home: Path, gate: TokenGate, base: str, mcp_paths: list[str],
                 sensitive: Callable[[], set[str]] = set,
                 shared: Callable[[], tuple[Any, Any]] | None = None) -> None:
        self.entity = entity
        #: Where several servers serve the entity: ``() -> (SharedValues store, JobClaims store or None)``, asked at
        #: first use ((None, None): this server alone). The records then live in the store (:class:`SharedRecords`).
        self.shared = shared
        self.sensitive = sensitive
        self.gate = gate
        self.base = base.rstrip("/")
        self.issuer = f"{self.base}/entities/{entity}/oauth"
        self.resources = [f"{self.base}{path}" for path in mcp_paths]
        self.store = OAuthStore(home)
        self.provider = _Provider(self)
        self.verifier = _Verifier(self.provider, gate)
        #: Other pages where the owner may approve with a login of their own (label, URL with ``{request}``).
        self.approvers: list[tuple[str, str]] = []

    # -- approval by a page plugin (the memory explorer) -----------------------------------------------------------

    def offer_approval(self, label: str, url: str) -> None:
        """Link the token page to another approval page (``url``: a same-origin path holding ``{request}``, the
        waiting request's id) where a logged-in owner approves without the token (with :meth:`approve`)."""
        if "{request}" not in url or not url.startswith("/"):
            raise ValueError("offer_approval: a same-origin path holding {request}")
        if (label, url) not in self.approvers:  # (mounted again: one link)
            self.approvers.append((label, url))

    async def waiting(self, request_id: str) -> dict[str, str] | None:
        """What a waiting authorization request asks (``client_name``, as the client registered it: untrusted
        text, escape it; ``client_id``; ``redirect_uri``; ``entity``), or None when unknown or expired. Where
        several servers serve the entity, any of them answers for a request made on another."""
        waiting = await self.provider.waiting(request_id)
        if waiting is None:
            return None
        client_id, params = waiting
        info = (await self.provider.records.client(client_id) or {}).get("info", {})
        return {"client_name": str(info.get("client_name") or client_id), "client_id": client_id,
                "redirect_uri": str(params.redirect_uri), "entity": self.entity}

    async def approve(self, request_id: str) -> str:
        """The owner (checked by the caller: the token, a login session) approves a waiting request: the URL to send
        the browser to, with a single-use code. ``LookupError`` when the request is unknown or expired."""
        return await self.provider.approve(request_id)

    async def deny(self, request_id: str) -> str:
        """The owner refuses a waiting request: the URL to send the browser to (``error=access_denied``).
        ``LookupError`` when the request is unknown or expired."""
        _, params = await self.provider.answer(request_id)
        return construct_redirect_uri(str(params.redirect_uri), error="access_denied", state=params.state)

    def is_resource(self, resource: str) -> bool:
        return resource.rstrip("/") in self.resources

    def resource_metadata_url(self, resource: str) -> AnyHttpUrl:
        return build_resource_metadata_url(AnyHttpUrl(resource))

    def routes(self) -> list[Route]:
        """The authorization server under ``/entities/<name>/oauth``, its metadata at the RFC 8414 well-known path,
        the approval page, and the protected-resource metadata of each MCP path."""
        issuer = AnyHttpUrl(self.issuer)
        registration = ClientRegistrationOptions(enabled=True)
        revocation = RevocationOptions(enabled=True)
        prefix = urlsplit(self.issuer).path
        routes: list[Route] = []
        authenticator = _Authenticator(self.provider)  # type: ignore[arg-type]
        own = {TOKEN_PATH: TokenHandler(self.provider, authenticator).handle,  # type: ignore[arg-type]
               REVOCATION_PATH: RevocationHandler(self.provider, authenticator).handle}  # type: ignore[arg-type]
        for route in create_auth_routes(self.provider, issuer, client_registration_options=registration,
                                        revocation_options=revocation):
            if route.path == "/.well-known/oauth-authorization-server":
                continue  # served at the well-known path for an issuer with a path, below
            endpoint = cors_middleware(own[route.path], ["POST", "OPTIONS"]) if route.path in own else route.endpoint
            routes.append(Route(prefix + route.path, endpoint, methods=route.methods))
        metadata = build_metadata(issuer, None, registration, revocation)
        handler = cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"])
        for path in (f"/.well-known/oauth-authorization-server{prefix}", f"{prefix}/.well-known/oauth-authorization-server"):
            routes.append(Route(path, handler, methods=["GET", "OPTIONS"]))
        routes.append(Route(f"{prefix}/approve", self._approve, methods=["GET", "POST"]))
        for resource in self.resources:
            routes += create_protected_resource_routes(AnyHttpUrl(resource), [issuer],
                                                       resource_name=f"PPS entity {self.entity}")
        return routes

    def guard(self, app, resource: str):
        """The SDK's bearer middleware around an MCP endpoint: the static token or an access token of this entity;
        a 401 names the protected-resource metadata (``WWW-Authenticate: Bearer resource_metadata=...``)."""
        from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
        from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
        from starlette.middleware.authentication import AuthenticationMiddleware

        inner = RequireAuthMiddleware(AuthContextMiddleware(_NotSensitive(app, self.sensitive)), [],
                                      self.resource_metadata_url(resource))
        return AuthenticationMiddleware(inner, backend=BearerAuthBackend(self.verifier))

    # -- the owner's approval page -------------------------------------------------------------------------------

    async def _page(self, request_id: str, csrf: str, error: str = "", status: int = 200) -> Response:
        waiting = await self.waiting(request_id)
        if waiting is None:
            return HTMLResponse("<!doctype html><title>Expired</title><p>This approval request is unknown or "
                                "expired. Start connecting again from your client.</p>",
                                status_code=400, headers=_HEADERS)
        e = html.escape
        elsewhere = "".join(f'<p>Logged into the {e(label)}? <a href="{e(url.replace("{request}", quote(request_id)))}">'
                            f"Approve in the {e(label)}</a>, without the token.</p>" for label, url in self.approvers)
        page = _PAGE.format(entity=e(self.entity), client=e(waiting["client_name"]),
                            redirect=e(waiting["redirect_uri"]), request=e(request_id), csrf=e(csrf),
                            error=f'<p class="err">{e(error)}</p>' if error else "", elsewhere=elsewhere)
        response = HTMLResponse(page, status_code=status, headers=_HEADERS)
        secure = "; Secure" if self.base.startswith("https:") else ""
        response.headers.append("set-cookie", f"{CSRF_COOKIE}={csrf}; Path={urlsplit(self.issuer).path}; "
                                              f"HttpOnly; SameSite=Strict{secure}")
        return response

    async def _approve(self, request: Request) -> Response:
        if request.method == "GET":
            return await self._page(request.query_params.get("request", ""), secrets.token_urlsafe(24))
        form = await request.form()
        request_id = str(form.get("request", ""))
        csrf, cookie = str(form.get("csrf", "")), request.cookies.get(CSRF_COOKIE, "")
        origin = request.headers.get("origin")
        base = urlsplit(self.base)
        if (not cookie or not hmac.compare_digest(csrf.encode(), cookie.encode())
                or (origin not in (None, "null") and origin.lower() != f"{base.scheme}://{base.netloc}".lower())):
            return HTMLResponse("<!doctype html><title>Refused</title><p>This form was not sent from this "
                                "server's own page. Reload it and try again.</p>", status_code=403, headers=_HEADERS)
        if await self.waiting(request_id) is None:
            return await self._page(request_id, csrf)  # the expired page
        if form.get("decision") != "deny" and not self.gate.accepts(str(form.get("token", "")).strip()):
            return await self._page(request_id, csrf, "That is not this entity's token.", status=403)
        try:
            url = await (self.deny(request_id) if form.get("decision") == "deny" else self.approve(request_id))
        except LookupError:  # answered meanwhile (on another page, another server)
            return await self._page(request_id, csrf)
        return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})

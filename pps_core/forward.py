"""Forwarding to the entity's running server (stdlib only: the CLI imports it on every call).

When an HTTP server owns the entity's stores, its owner lock carries its address; ``pps call`` and
``pps serve mcp`` then send each operation there instead of opening the stores a second time.
"""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from . import errors
from .auth import read_token
from .owner import read_owner

if TYPE_CHECKING:  # pragma: no cover
    from .settings import EntitySettings

CONNECT_TIMEOUT_S = 2.0
#: Some operations (graph ingestion with an LLM) take a while; ``PPS_FORWARD_TIMEOUT`` overrides.
READ_TIMEOUT_S = 120.0


def server_address(home: Path) -> str | None:
    """The base URL of the server that owns this entity, or None when nobody serves it."""
    owner = read_owner(Path(home))
    return (owner or {}).get("address") or None


def try_forward(settings: EntitySettings, operation: str, params: dict[str, Any] | None) -> Any | None:
    """Run ``operation`` on the entity's server; None when no server owns the entity.

    A 4xx answer is raised as the matching :class:`~pps_core.errors.PPSError`; a server that
    holds the lock but does not answer raises :class:`~pps_core.errors.Unavailable`.
    """
    address = server_address(settings.home)
    if not address:
        return None
    token = read_token(settings.home)
    try:
        return request(address, "POST", f"/tools/{quote(operation, safe='')}", token, params or {})
    except errors.Unavailable:
        if server_address(settings.home) is None:  # it stopped meanwhile: the caller may own the stores
            return None
        raise


def request(address: str, method: str, path: str, token: str | None, body: Any = None) -> Any:
    """One JSON request to a PPS server; returns the decoded answer or raises a PPSError."""
    url = urlsplit(address)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise errors.ConfigError(f"owner lock names an unusable server address {address!r}")
    conn_cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(url.hostname, url.port, timeout=CONNECT_TIMEOUT_S)
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.connect()
        conn.sock.settimeout(float(os.environ.get("PPS_FORWARD_TIMEOUT") or READ_TIMEOUT_S))
        conn.request(method, url.path.rstrip("/") + path, body=data, headers=headers)
        resp = conn.getresponse()
        status, raw = resp.status, resp.read()
    except (OSError, http.client.HTTPException) as exc:  # timeouts are OSErrors too
        raise errors.Unavailable(f"the server at {address} owns this entity but did not answer "
                                 f"({type(exc).__name__}: {exc}); is it still starting or stuck?") from None
    finally:
        conn.close()
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = None
    if status < 400:
        return payload
    raise error_from_answer(status, payload, address)


def _codes() -> dict[str, type[errors.PPSError]]:
    out: dict[str, type[errors.PPSError]] = {}
    todo = [errors.PPSError]
    while todo:
        cls = todo.pop()
        out.setdefault(cls.code, cls)
        todo.extend(cls.__subclasses__())
    return out


def error_from_answer(status: int, payload: Any, address: str = "server") -> errors.PPSError:
    """Rebuild the server's PPSError from its JSON error body (``{"error", "message", "param"}``)."""
    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
        cls = _codes().get(payload["error"], errors.PPSError)
        exc = cls(str(payload.get("message") or payload["error"]), param=payload.get("param"))
        if cls is errors.PPSError:
            exc.status = status
        return exc
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if status == 404:
        return errors.UnknownOperation(f"{address}: not found{f' ({detail})' if detail else ''}")
    exc = errors.PPSError(f"{address} answered HTTP {status}{f': {detail}' if detail else ''}")
    exc.status = status
    return exc

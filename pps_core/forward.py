"""Forwarding to the entity's running server (standard library only: the CLI imports it on every call, and the
Claude Code hooks' fast path under ``python -S``).

When an HTTP server owns the entity's stores, its owner lock carries its address; ``pps call`` and
``pps serve mcp`` then send each operation there instead of opening the stores a second time.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import errors
from .auth import read_token
from .owner import read_owner

if TYPE_CHECKING:  # pragma: no cover
    from .settings import EntitySettings

CONNECT_TIMEOUT_S = 2.0
#: Some operations (an LLM's work behind them) take a while; ``PPS_FORWARD_TIMEOUT`` overrides.
READ_TIMEOUT_S = 120.0


def server_address(home: Path) -> str | None:
    """The base URL of the server that owns this entity, or None when nobody serves it."""
    owner = read_owner(Path(home))
    return (owner or {}).get("address") or None


#: How long a command waits for an owner that is still starting (a server that took the lock to serve and has not
#: yet published where: opening its stores on a busy machine) before going on without it; and how recent
#: "starting" is (a server that never publishes an address, a transport of its own, is waited for only while young).
STARTING_OWNER_WAIT_S = 30.0
STARTING_OWNER_AGE_S = 60.0


def owner_starting(home: Path) -> bool:
    """Whether the entity's owner took the lock to serve, has published no address yet, and started within the
    last minute."""
    owner = read_owner(Path(home))
    if owner is None or owner.get("address") or not owner.get("starting"):
        return False
    since = owner.get("since")
    return isinstance(since, (int, float)) and time.time() - since < STARTING_OWNER_AGE_S


def settled_server_address(home: Path, wait_s: float = STARTING_OWNER_WAIT_S) -> str | None:
    """:func:`server_address`, once an owner that is still starting has published where it serves (or let go),
    within ``wait_s``: a command run while the server starts (``pps doctor`` right after ``pps setup``) forwards
    to it, rather than finding the stores locked and failing."""
    deadline = time.monotonic() + wait_s
    while owner_starting(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    return server_address(home)


def try_forward(settings: EntitySettings, operation: str, params: dict[str, Any] | None) -> Any | None:
    """Run ``operation`` on the entity's server; None when no server owns the entity.

    A 4xx answer is raised as the matching :class:`~pps_core.errors.PPSError`; a server that
    holds the lock but does not answer raises :class:`~pps_core.errors.Unavailable`.
    """
    from urllib.parse import quote

    address = settled_server_address(settings.home)
    if not address:
        return None
    token = read_token(settings.home)
    try:
        return request(address, "POST", f"/tools/{quote(operation, safe='')}", token, params or {})
    except errors.Unavailable:
        if server_address(settings.home) is None:  # it stopped meanwhile: the caller may own the stores
            return None
        raise


def request(address: str, method: str, path: str, token: str | None, body: Any = None, *,
            timeout: float | None = None) -> Any:
    """One JSON request to a PPS server; returns the decoded answer or raises a PPSError.

    ``timeout`` bounds each wait on the socket (default: :data:`CONNECT_TIMEOUT_S` to connect, then
    ``PPS_FORWARD_TIMEOUT`` or :data:`READ_TIMEOUT_S`). Plain ``http://`` goes over one socket by hand: the
    hooks' fast path forwards through here, and ``http.client`` imports the email package, which costs a hook
    more than its own work.
    """
    url = _split(address)
    if url is None:
        raise errors.ConfigError(f"owner lock names an unusable server address {address!r}")
    data = None if body is None else json.dumps(body).encode()
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    read_timeout = timeout if timeout is not None else float(os.environ.get("PPS_FORWARD_TIMEOUT") or READ_TIMEOUT_S)
    scheme, host, port, base = url
    target = base.rstrip("/") + path
    try:
        if scheme == "http":
            status, raw = _plain_http(host, port or 80, method, target, headers, data,
                                      timeout if timeout is not None else CONNECT_TIMEOUT_S, read_timeout)
        else:
            status, raw = _https(host, port, method, target, headers, data, read_timeout)
    except (OSError, ValueError) as exc:  # timeouts are OSErrors too; ValueError: an answer that is not HTTP
        raise errors.Unavailable(f"the server at {address} owns this entity but did not answer "
                                 f"({type(exc).__name__}: {exc}); is it still starting or stuck?") from None
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = None
    if status < 400:
        return payload
    raise error_from_answer(status, payload, address)


def _split(address: str) -> tuple[str, str, int | None, str] | None:
    """``(scheme, host, port, path)`` of an ``http(s)://host[:port][/path]`` address, or None (by hand:
    ``urllib.parse`` costs a hook more than the rest of this module)."""
    scheme, sep, rest = address.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    netloc, slash, path = rest.partition("/")
    if "@" in netloc:
        return None
    if netloc.startswith("["):  # [::1]:8765
        host, _, tail = netloc[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ("" if not tail else "x")
    else:
        host, _, port_text = netloc.partition(":")
    if not host or (port_text and not (port_text.isdigit() and 0 < int(port_text) < 65536)):
        return None
    return scheme, host, int(port_text) if port_text else None, slash + path


def _plain_http(host: str, port: int, method: str, target: str, headers: dict[str, str], data: bytes | None,
                connect_timeout: float, read_timeout: float) -> tuple[int, bytes]:
    """One HTTP/1.1 exchange on a fresh socket (``Connection: close``): (status, body)."""
    import socket

    head = [f"{method} {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
            f"Content-Length: {len(data or b'')}", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection((host, port), timeout=connect_timeout) as sock:
        sock.settimeout(read_timeout)
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (data or b""))
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    header, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        raise ValueError("the answer is not HTTP") from None
    if any(line.lower().replace(" ", "") == "transfer-encoding:chunked" for line in lines[1:]):
        body = _unchunk(body)
    return status, body


def _unchunk(data: bytes) -> bytes:
    out = []
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(data[:size])
        data = data[size + 2:]
    return b"".join(out)


def _https(host: str, port: int | None, method: str, target: str, headers: dict[str, str], data: bytes | None,
           read_timeout: float) -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPSConnection(host, port, timeout=CONNECT_TIMEOUT_S)
    try:
        conn.connect()
        conn.sock.settimeout(read_timeout)
        conn.request(method, target, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except http.client.HTTPException as exc:
        raise OSError(str(exc)) from None
    finally:
        conn.close()


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

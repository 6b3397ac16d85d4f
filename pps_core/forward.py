"""Forwarding to the process that owns an entity (standard library only: the CLI imports it on every call, and
the Claude Code hooks' fast path under ``python -S``).

Whatever transport it serves, an owner answers on the kernel's local channel (:mod:`pps_core.channel`: a 0600
Unix socket, one JSON request per line) and names it in its owner lock; ``pps call``, the hooks and a forwarding
transport (stdio MCP) send each operation there instead of opening the stores a second time. An address is
``unix:<socket path>`` (an owner's channel) or an ``http(s)://`` URL (a server elsewhere: the fleet's
``[claude_code] server_url``, reached with :mod:`urllib`).
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


#: An owner's local channel as an address: ``unix:`` and the socket's path.
CHANNEL_SCHEME = "unix:"


def address_of(owner: dict[str, Any] | None) -> str | None:
    """Where other processes reach the owner an owner lock names (:func:`~pps_core.owner.read_owner`): its local
    channel, else an HTTP address it published; None when it serves neither."""
    owner = owner or {}
    channel = owner.get("channel")
    if isinstance(channel, str) and channel.startswith("/"):
        return CHANNEL_SCHEME + channel
    address = owner.get("address")
    return address if isinstance(address, str) and address else None


def server_address(home: Path) -> str | None:
    """Where the process that owns this entity answers (:func:`address_of`), or None when nobody serves it."""
    return address_of(read_owner(Path(home)))


#: How long a command waits for an owner that is still starting (a server that took the lock to serve and has not
#: yet published where: opening its stores on a busy machine) before going on without it; and how recent
#: "starting" is (a server that never publishes an address, a transport of its own, is waited for only while young).
STARTING_OWNER_WAIT_S = 30.0
STARTING_OWNER_AGE_S = 60.0


def owner_starting(home: Path) -> bool:
    """Whether the entity's owner took the lock to serve, has published no address yet, and started within the
    last minute."""
    owner = read_owner(Path(home))
    if owner is None or address_of(owner) or not owner.get("starting"):
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


def try_forward(settings: EntitySettings, operation: str, params: dict[str, Any] | None, *,
                timeout: float | None = None) -> Any | None:
    """Run ``operation`` on the entity's owner; None when no process serves the entity. ``timeout`` bounds each
    wait as in :func:`request`.

    An error answer is raised as the matching :class:`~pps_core.errors.PPSError`; an owner that holds the lock
    but does not answer raises :class:`~pps_core.errors.Unavailable`.
    """
    address = settled_server_address(settings.home)
    if not address:
        return None
    try:
        return call(address, operation, params or {}, read_token(settings.home), timeout=timeout)
    except errors.Unavailable:
        if server_address(settings.home) is None:  # it stopped meanwhile: the caller may own the stores
            return None
        raise


def call(address: str, operation: str, params: dict[str, Any] | None, token: str | None = None, *,
         timeout: float | None = None, relay: dict[str, Any] | None = None) -> Any:
    """Run ``operation`` at ``address``: an owner's channel (the socket's permissions admit this process, as the
    entity's user; ``token`` is not sent) or an HTTP server (``token`` as its bearer token).

    ``relay`` (the channel only): the caller a forwarding transport serves, for the owner to admit instead of
    this process, ``{"via": name}`` for one its transport vouched for, ``{"token": t, "via": name}`` for one that
    presented ``t`` (None: nothing). ``timeout`` bounds each wait as in :func:`request`.
    """
    path = _channel_of(address)
    if path is not None:
        return _channel(path, {"op": "call", "name": operation, "params": params or {}, **(relay or {})}, timeout)
    from urllib.parse import quote

    return _http(address, "POST", f"/tools/{quote(operation, safe='')}", token, params or {}, timeout)


def tools(address: str, token: str | None = None, *, timeout: float | None = None,
          relay: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The operations the owner at ``address`` serves, as tool specs (``ToolSpec.to_dict``)."""
    path = _channel_of(address)
    answer = (_channel(path, {"op": "tools", **(relay or {})}, timeout) if path is not None
              else _http(address, "GET", "/tools", token, None, timeout))
    return list(answer["tools"])


def health(address: str, *, timeout: float | None = None) -> Any:
    """Whether the owner at ``address`` answers (no token needed): its channel's ``ping``, or an HTTP server's
    ``GET /health`` at its origin. Raises :class:`~pps_core.errors.Unavailable` when it does not."""
    path = _channel_of(address)
    if path is not None:
        return _channel(path, {"op": "ping"}, timeout)
    url = _split(address)
    if url is None:
        raise errors.ConfigError(f"owner lock names an unusable server address {address!r}")
    scheme, host, port, _ = url
    origin = f"{scheme}://{'[' + host + ']' if ':' in host else host}{f':{port}' if port else ''}"
    return _http(origin, "GET", "/health", None, None, timeout)


def request(address: str, method: str, path: str, token: str | None, body: Any = None, *,
            timeout: float | None = None) -> Any:
    """One JSON request in the HTTP plugin's REST terms; returns the decoded answer or raises a PPSError.

    On an owner's channel (``unix:``) the forwarding protocol's routes are answered as :func:`call`,
    :func:`tools` and :func:`health` answer them (``POST /tools/<op>``, ``GET /tools``, ``GET /health``).
    ``timeout`` bounds each wait on the socket (default: :data:`CONNECT_TIMEOUT_S` to connect, then
    ``PPS_FORWARD_TIMEOUT`` or :data:`READ_TIMEOUT_S`).
    """
    channel = _channel_of(address)
    if channel is None:
        return _http(address, method, path, token, body, timeout)
    route = path.split("?", 1)[0].rstrip("/")
    if method == "POST" and route.startswith("/tools/") and route.count("/") == 2:
        name = route[len("/tools/"):]
        if "%" in name:  # (urllib.parse only then: a hook's fast path forwards through here)
            from urllib.parse import unquote

            name = unquote(name)
        return call(address, name, body if isinstance(body, dict) else {}, timeout=timeout)
    if method == "GET" and route == "/tools":
        return {"tools": tools(address, timeout=timeout)}
    if method == "GET" and route == "/health":
        return health(address, timeout=timeout)
    raise errors.UnknownOperation(f"{address}: not found ({method} {path} is not a route of the local channel)")


def _channel_of(address: str) -> str | None:
    """The socket path of a ``unix:`` address, or None for another kind."""
    if not address.startswith(CHANNEL_SCHEME):
        return None
    path = address[len(CHANNEL_SCHEME):]
    if not path.startswith("/") or "\x00" in path:
        raise errors.ConfigError(f"owner lock names an unusable channel {address!r}")
    return path


def _timeouts(timeout: float | None) -> tuple[float, float]:
    read = timeout if timeout is not None else float(os.environ.get("PPS_FORWARD_TIMEOUT") or READ_TIMEOUT_S)
    return (timeout if timeout is not None else CONNECT_TIMEOUT_S), read


def _channel(path: str, message: dict[str, Any], timeout: float | None) -> Any:
    """One request on an owner's local channel (:mod:`pps_core.channel`): a JSON line out, a JSON line back."""
    import socket

    connect_timeout, read_timeout = _timeouts(timeout)
    line = json.dumps(message).encode() + b"\n"
    chunks: list[bytes] = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(connect_timeout)
            sock.connect(path)
            sock.settimeout(read_timeout)
            sock.sendall(line)
            while not chunks or not chunks[-1].endswith(b"\n"):
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError as exc:  # refused or gone: an owner that died; a timeout: one that is stuck
        raise errors.Unavailable(f"the process that owns this entity did not answer on its channel {path} "
                                 f"({type(exc).__name__}: {exc}); is it stopping or stuck?") from None
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or "ok" not in answer:
        raise errors.Unavailable(f"the process that owns this entity closed its channel {path} without an answer")
    if answer["ok"]:
        return answer.get("result")
    error = answer.get("error")
    if not isinstance(error, dict):
        error = {}
    status = error.get("status")
    raise error_from_answer(status if isinstance(status, int) else 500, error, f"the owner's channel {path}")


def _http(address: str, method: str, path: str, token: str | None, body: Any, timeout: float | None) -> Any:
    """One JSON request to a PPS HTTP server, with :mod:`urllib` (no proxy, no redirect followed)."""
    import urllib.error
    import urllib.request
    from http.client import HTTPException

    url = _split(address)
    if url is None:
        raise errors.ConfigError(f"owner lock names an unusable server address {address!r}")
    data = None if body is None else json.dumps(body).encode()
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    _, read_timeout = _timeouts(timeout)

    class NoRedirect(urllib.request.HTTPRedirectHandler):  # a moved JSON API is an error to show, not a GET
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect())
    req = urllib.request.Request(address.rstrip("/") + path, data=data, headers=headers, method=method)
    try:
        with opener.open(req, timeout=read_timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
        exc.close()
    except (OSError, HTTPException, ValueError) as exc:  # URLError and timeouts are OSErrors
        reason = getattr(exc, "reason", None) or exc
        raise errors.Unavailable(f"the server at {address} did not answer ({type(exc).__name__}: {reason}); "
                                 "is it still starting or stuck?") from None
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = None
    if status < 300:
        return payload
    raise error_from_answer(status, payload, address)


def _split(address: str) -> tuple[str, str, int | None, str] | None:
    """``(scheme, host, port, path)`` of an ``http(s)://host[:port][/path]`` address, or None."""
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

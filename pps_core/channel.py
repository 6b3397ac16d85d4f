"""The kernel's local channel: how other processes reach the process that owns an entity, whatever transport it
serves (HTTP, stdio MCP, a third party's Unix socket).

Every process that owns an entity to serve it (``pps serve <any transport>``: :mod:`pps_core.serving`) answers
on a Unix socket of the kernel's own, :func:`~pps_core.owner.channel_path` (``<home>/owner.sock``, or a short
path in a private runtime folder when the home's is too long for AF_UNIX), and names it in the owner lock
(``"channel"``). ``pps call``, ``pps health``, the Claude Code hooks and a forwarding transport reach the owner
there (the client is :mod:`pps_core.forward`, standard library only). A transport has nothing to do for it.

The protocol: one JSON object per line, one JSON object per line back.

- ``{"op": "call", "name": <operation>, "params": {...}}`` -> ``{"ok": true, "result": ...}``
- ``{"op": "tools"}`` -> ``{"ok": true, "result": {"tools": [<tool spec>, ...]}}``
- ``{"op": "ping"}`` -> ``{"ok": true, "result": {"entity": <name>, "pid": <pid>}}``
- an error: ``{"ok": false, "error": {"error": <code>, "message": ..., "param"?: ..., "status": <HTTP-like>}}``
  (:func:`pps_core.forward.error_from_answer` rebuilds the :class:`~pps_core.errors.PPSError`).

Who may call: the socket is 0600 (in the entity's 0700 home, or a 0700 folder of the user's), so only the
entity's own user can connect; the operating system is the gate and such a caller is trusted, as a process of
that user opening the stores itself would be. A forwarding transport that relays a caller it did not vouch for
adds ``"token": <what that caller presented>`` (and ``"via"``): the owner then admits that caller by the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from .errors import InvalidParams, PPSError, TooLarge
from .owner import channel_path
from .reach import Caller, LocalEntity

log = logging.getLogger("pps")

#: What a request line may hold beyond the operation's parameters (the envelope).
ENVELOPE_BYTES = 4096
#: On close, how long calls in flight on the channel may take to finish before they are cancelled.
CLOSE_GRACE_S = 5.0


class Channel:
    """The local channel of one entity this process owns: :meth:`start` binds and publishes it, :meth:`close`
    stops it, lets the calls in flight finish and removes the socket."""

    def __init__(self, entity: LocalEntity) -> None:
        self.entity = entity
        self.path: Path | None = None
        self._server: asyncio.Server | None = None
        self._ino: int | None = None
        self._conns: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        memory = self.entity.memory
        assert memory is not None
        limit = self.entity.max_request_bytes + ENVELOPE_BYTES
        path = channel_path(memory.home)
        try:
            self._server = await self._bind(path, limit)
        except OSError:  # a home on a file system that takes no sockets (a network or FUSE mount)
            path = channel_path(memory.home, short=True)
            self._server = await self._bind(path, limit)
        os.chmod(path, 0o600)  # made under the server's 077 umask in a private folder: never open to others
        self._ino = os.stat(path).st_ino
        self.path = path
        memory.lock.set_channel(path)

    async def _bind(self, path: Path, limit: int) -> asyncio.Server:
        path.unlink(missing_ok=True)  # this process holds the owner lock: no other owner listens there
        return await asyncio.start_unix_server(self._connection, path=str(path), limit=limit)

    async def close(self) -> None:
        memory = self.entity.memory
        if self._server is None:
            return
        if memory is not None and memory.lock.held:
            memory.lock.set_channel(None)  # no new caller is sent here
        self._server.close()
        if self._conns:
            await asyncio.wait(set(self._conns), timeout=CLOSE_GRACE_S)
        for task in list(self._conns):
            task.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), CLOSE_GRACE_S)
        self._server = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == self._ino:  # still ours (not a later owner's)
                    self.path.unlink()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    line = exc.partial
                except asyncio.LimitOverrunError as exc:
                    await _skip_line(reader, exc.consumed)  # read to its end: the sender is not cut off
                    error = TooLarge(f"request over {self.entity.max_request_bytes} bytes (limits.max_request_bytes)")
                    writer.write(_encode(_failure(error)))
                    await writer.drain()
                    continue
                if not line.strip():
                    return
                writer.write(_encode(await self._answer(line)))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the caller went away, or the channel closes
        finally:
            if task is not None:
                self._conns.discard(task)
            writer.close()

    async def _answer(self, line: bytes) -> dict[str, Any]:
        entity = self.entity
        try:
            try:
                message = json.loads(line)
            except ValueError:
                raise InvalidParams("the local channel takes one JSON object per line") from None
            if not isinstance(message, dict):
                raise InvalidParams("the local channel takes one JSON object per line")
            caller = _caller(message)
            op = message.get("op")
            if op == "ping":
                return {"ok": True, "result": {"entity": entity.name, "pid": os.getpid()}}
            if op == "tools":
                entity.admit(caller)
                return {"ok": True, "result": {"tools": [spec.to_dict() for spec in await entity.tools()]}}
            if op != "call":
                raise InvalidParams(f"op {str(op)[:40]!r}: the local channel answers call, tools and ping",
                                    param="op")
            name, params = message.get("name"), message.get("params")
            if not isinstance(name, str) or not name:
                raise InvalidParams("name the operation to call", param="name")
            if params is not None and not isinstance(params, dict):
                raise InvalidParams("params is a JSON object", param="params")
            return {"ok": True, "result": await entity.call(name, params, caller=caller, size=len(line))}
        except PPSError as exc:
            return _failure(exc)


async def _skip_line(reader: asyncio.StreamReader, consumed: int) -> None:
    """Discard the rest of a line over the limit (``consumed``: what the buffer holds of it)."""
    while True:
        await reader.readexactly(consumed)
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as more:
            consumed = more.consumed


def _caller(message: dict[str, Any]) -> Caller:
    """This process's own user (the socket's permissions admitted it), or the caller a forwarding transport
    relays with the token it presented."""
    via = message.get("via")
    via = via[:40] if isinstance(via, str) and via else "channel"
    if "token" in message:
        token = message["token"]
        return Caller(token=token if isinstance(token, str) else None, via=via)
    return Caller.trusted(via)


def _failure(exc: PPSError) -> dict[str, Any]:
    return {"ok": False, "error": {**exc.to_dict(), "status": exc.status}}


def _encode(answer: dict[str, Any]) -> bytes:
    try:
        return json.dumps(answer).encode() + b"\n"
    except (TypeError, ValueError) as exc:  # an operation answered what JSON cannot hold: a bug, logged
        log.error("the local channel could not encode an answer: %s", exc)
        return json.dumps(_failure(PPSError(f"the answer could not be encoded ({type(exc).__name__})"))).encode() + b"\n"

"""One way to reach an entity: open its stores here, or forward to the process that owns them (§5 of the design).

A transport, ``pps call`` and the hooks all ask the same question: does a server own this entity? If so every
call goes there (:class:`RemoteEntity`, over :mod:`pps_core.forward`); if not, the stores are opened here and
the owner lock taken (:class:`LocalEntity` over :class:`~pps_core.memory.Memory`). Either way the caller gets an
:class:`Entity`: list its operations, call one as a :class:`Caller`, with the entity's auth, limits and error
mapping applied here, once, for every transport. :class:`EntityClient` is the blocking form for short-lived
commands.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import errors
from .auth import TokenGate, read_token
from .catalog import ToolSpec
from .forward import (
    STARTING_OWNER_WAIT_S,
    owner_starting,
    server_address,
    settled_server_address,
    try_forward,
)
from .forward import call as forward_call
from .forward import tools as forward_tools
from .privacy import reset_secret_scanner, use_secret_scanner

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

    from .memory import Memory
    from .settings import EntitySettings

log = logging.getLogger("pps")


@dataclass(frozen=True)
class Caller:
    """Who calls, as the transport saw them.

    ``Caller(token=...)`` presented a bearer token (``None``: none), checked against the entity's own.
    ``Caller.trusted(via)`` was admitted by the transport's own gate, which the transport vouches for: the pipe
    of the process that started it (stdio), a socket file only the entity's user can open. A trusted caller may
    also run sensitive operations (token rotation).
    """

    token: str | None = None
    vouched: bool = False
    via: str = ""

    @classmethod
    def trusted(cls, via: str) -> Caller:
        return cls(vouched=True, via=via)


class Entity:
    """An entity as a transport serves it. Subclasses: :class:`LocalEntity`, :class:`RemoteEntity`."""

    name: str
    settings: EntitySettings
    #: The opened memory when this process owns the entity; None when calls are forwarded.
    memory: Memory | None = None
    gate: TokenGate
    #: Calls running now, and when the last one ended (``time.monotonic``): a server started on demand stops
    #: once idle (``pps_core.serving.run(idle_s=...)``).
    active: int = 0
    last_call: float = 0.0

    def idle_for(self) -> float:
        """Seconds since the last call ended (since the entity was reached, before any); 0 while one runs."""
        return 0.0 if self.active else time.monotonic() - self.last_call

    @property
    def max_request_bytes(self) -> int:
        """The largest request a transport should read for this entity (``limits.max_request_bytes``)."""
        return self.settings.limits.max_request_bytes

    def admit(self, caller: Caller, *, sensitive: bool = False) -> None:
        """Raise Unauthorized/InvalidToken/Forbidden unless ``caller`` may call this entity."""
        if not caller.vouched:
            self.gate.check(caller.token, sensitive=sensitive)

    def check_size(self, params: Any, size: int | None = None) -> None:
        """TooLarge when a request is over the limit: ``size`` as read off the wire, else the parameters' JSON."""
        limit = self.max_request_bytes
        if size is None:
            try:
                size = len(json.dumps(params, ensure_ascii=False, separators=(",", ":"),
                                      default=str).encode("utf-8", "surrogatepass"))
            except RecursionError:
                raise errors.InvalidParams("parameters nest too deep") from None
        if size > limit:
            raise errors.TooLarge(f"request over {limit} bytes (limits.max_request_bytes)")

    async def tools(self) -> list[ToolSpec]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def call(self, name: str, params: dict[str, Any] | None, *, caller: Caller,
                   size: int | None = None) -> Any:
        """Run one operation for ``caller``: plain JSON data back, or a :class:`~pps_core.errors.PPSError`
        (never another exception: an unexpected failure is logged here and reported without its traceback)."""
        self.active += 1
        try:
            return await self._call(name, params, caller=caller, size=size)
        finally:
            self.active -= 1
            self.last_call = time.monotonic()

    async def _call(self, name: str, params: dict[str, Any] | None, *, caller: Caller,
                    size: int | None) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def publish(self, address: str | None) -> None:
        """Write the address where this entity is served into its owner lock (``pps call``, stdio MCP and the
        hooks forward there). Only an owner publishes; a forwarding entity ignores it."""


class LocalEntity(Entity):
    """This process owns the entity: calls run on its open :class:`~pps_core.memory.Memory`."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.settings = memory.settings
        self.name = memory.settings.entity
        self.gate = TokenGate(self.name, memory.home)
        self.last_call = time.monotonic()
        self._specs: tuple[int, list[ToolSpec]] | None = None

    async def tools(self) -> list[ToolSpec]:
        memory = self.memory
        assert memory is not None
        catalog = memory.catalog
        if self._specs is None or self._specs[0] != id(catalog):  # fixed once open: built once
            self._specs = (id(catalog), [op.spec() for op in catalog])
        return self._specs[1]

    async def _call(self, name: str, params: dict[str, Any] | None, *, caller: Caller,
                    size: int | None) -> Any:
        memory = self.memory
        assert memory is not None
        self.admit(caller)  # before the catalog: a caller without the token learns nothing about it
        op = memory.operation(name)
        if op.sensitive:
            self.admit(caller, sensitive=True)
        self.check_size(params, size)
        try:
            return await memory.call(name, params)
        except errors.PPSError:
            raise
        except Exception as exc:  # a bug, not the caller's fault: the log gets the traceback
            log.exception("operation %s failed", name)
            raise errors.PPSError(f"{name} failed unexpectedly ({type(exc).__name__}); see the server log") from None

    def publish(self, address: str | None) -> None:
        assert self.memory is not None
        self.memory.lock.set_address(address)


class RemoteEntity(Entity):
    """Another process owns the entity: every call is forwarded there, on the owner's local channel
    (:mod:`pps_core.channel`) as the caller this transport saw, or to an HTTP address with the entity's token,
    read from its home on every call (a rotation is picked up at once; a restarted owner's new address too)."""

    def __init__(self, settings: EntitySettings, address: str) -> None:
        self.settings = settings
        self.name = settings.entity
        self.home = Path(settings.home)
        self.address = address.rstrip("/")
        self.gate = TokenGate(self.name, self.home)
        self.last_call = time.monotonic()

    async def _forward(self, send: Any, *args: Any, caller: Caller | None = None) -> Any:
        self.address = (server_address(self.home) or self.address).rstrip("/")
        relay: dict[str, Any] = {"via": caller.via or "forwarded"} if caller is not None else {}
        if caller is not None and not caller.vouched:
            relay["token"] = caller.token  # the owner admits that caller, not this process
        try:
            return await asyncio.to_thread(partial(send, self.address, *args, read_token(self.home), relay=relay))
        except errors.Unavailable:
            if server_address(self.home) is None:
                raise errors.Unavailable(
                    f"the process that owned entity {self.name!r} has stopped: start it again, "
                    "or restart this process to own the stores") from None
            raise

    async def tools(self) -> list[ToolSpec]:
        return [ToolSpec.from_dict(spec) for spec in await self._forward(forward_tools)]

    async def _call(self, name: str, params: dict[str, Any] | None, *, caller: Caller,
                    size: int | None) -> Any:
        self.admit(caller)
        self.check_size(params, size)
        return await self._forward(forward_call, name, params or {}, caller=caller)


def owner_address(home: Path | str) -> str | None:
    """Where the process that owns this entity serves it, or None (nobody owns it, or its owner serves no address)."""
    return server_address(Path(home))


def settled_owner_address(home: Path | str, wait_s: float = STARTING_OWNER_WAIT_S) -> str | None:
    """:func:`owner_address`, once an owner still starting has published where it serves, or let go
    (:func:`~pps_core.forward.settled_server_address`)."""
    return settled_server_address(Path(home), wait_s)


async def settled_owner_address_async(home: Path | str, wait_s: float = STARTING_OWNER_WAIT_S) -> str | None:
    """:func:`settled_owner_address` without blocking the event loop."""
    home = Path(home)
    deadline = time.monotonic() + wait_s
    while owner_starting(home) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return owner_address(home)


@asynccontextmanager
async def open_entity(settings: EntitySettings, *, forward: bool = True,
                      plugin_manager: pluggy.PluginManager | None = None,
                      extra_plugins: Sequence[Any] = (), serving: bool = False) -> AsyncIterator[Entity]:
    """The entity, reached: forwarded to its owner when one serves it (and ``forward``), else opened here (the
    owner lock taken, a second owner refused with a clear error) and closed when the block ends. ``serving``: it
    is opened to be served, so until an address is published the lock says "starting" (commands wait for it)."""
    address = await settled_owner_address_async(settings.home) if forward else None
    if address:
        yield RemoteEntity(settings, address)
        return
    from .memory import Memory

    memory = Memory(settings, plugin_manager=plugin_manager, extra_plugins=extra_plugins)
    memory.lock.starting = serving
    async with memory:
        yield LocalEntity(memory)


class EntityClient:
    """``with EntityClient(settings) as c: c.call("store_messages", {...})``: the blocking form, for hooks and
    imports (short-lived commands). With a server, every call is forwarded; without one, the stores are opened
    here for the life of the client and closed at the end."""

    def __init__(self, settings: EntitySettings, *, plugins: list[str] | None = None) -> None:
        self.settings = settings
        self._plugins = plugins
        self._loop: asyncio.AbstractEventLoop | None = None
        self._memory: Memory | None = None
        self.mode: str | None = None

    def __enter__(self) -> EntityClient:
        self.mode = "server" if settled_owner_address(self.settings.home) else "direct"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def call(self, operation: str, params: dict[str, Any] | None = None) -> Any:
        if self.mode is None:
            self.__enter__()
        if self.mode == "server":
            answer = try_forward(self.settings, operation, params or {})
            if answer is not None:
                return answer
            self.mode = "direct"  # the server went away between calls
        memory, loop = self._open()
        return loop.run_until_complete(memory.call(operation, params or {}))

    @property
    def memory(self) -> Memory:
        """The memory opened here (direct mode only)."""
        return self._open()[0]

    def _open(self) -> tuple[Memory, asyncio.AbstractEventLoop]:
        if self._memory is None or self._loop is None:
            from .memory import Memory

            settings = self.settings
            if self._plugins is not None:
                settings = settings.model_copy(update={"plugins": self._plugins})
            self._loop = asyncio.new_event_loop()
            memory = Memory(settings)
            self._loop.run_until_complete(memory.open())
            self._memory = memory
        return self._memory, self._loop

    def close(self) -> None:
        if self._memory is not None and self._loop is not None:
            try:
                self._loop.run_until_complete(self._memory.close())
            finally:
                self._memory = None
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def run_call(args: Any, operation: str, params: dict[str, Any]) -> Any:
    """One operation for a ``pps`` command (``args.entity``/``args.home``/``args.local``): forwarded to the
    entity's running server unless ``--local``, else run on stores opened here for the call."""
    from .memory import Memory
    from .settings import load_settings

    settings = load_settings(args.entity, args.home, must_exist=True)
    if not getattr(args, "local", False):
        forwarded = try_forward(settings, operation, params)
        if forwarded is not None:
            return forwarded

    memory = Memory(settings, lazy=True)
    memory.load_catalog()  # a wrong name or parameter is answered here: no layer is built, no store opened
    token = use_secret_scanner(memory.secret_scanner)
    try:
        memory.operation(operation).validate(params)
    finally:
        reset_secret_scanner(token)

    async def go() -> Any:  # lazy: the call opens only the stores it needs
        async with memory:
            return await memory.call(operation, params)

    return asyncio.run(go())

"""Reach an entity from a short-lived command: its running server when there is one, else its stores.

Hooks and imports use this so they never open the stores a second time while a server owns them
(§5 of the design): with a server, every call is forwarded; without one, the stores are opened here
for the life of the client and closed at the end.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .forward import server_address, try_forward

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory
    from .settings import EntitySettings


class EntityClient:
    """``with EntityClient(settings) as c: c.call("store_messages", {...})`` (blocking)."""

    def __init__(self, settings: EntitySettings, *, plugins: list[str] | None = None) -> None:
        self.settings = settings
        self._plugins = plugins
        self._loop: asyncio.AbstractEventLoop | None = None
        self._memory: Memory | None = None
        self.mode: str | None = None

    def __enter__(self) -> EntityClient:
        self.mode = "server" if server_address(self.settings.home) else "direct"
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
    memory.operation(operation).validate(params)

    async def go() -> Any:  # lazy: the call opens only the stores it needs
        async with memory:
            return await memory.call(operation, params)

    return asyncio.run(go())

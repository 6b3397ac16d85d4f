"""Entry point of the explorer: mounts its pages on the HTTP transport and keeps recall latencies for the plots."""

from __future__ import annotations

from collections import deque
from typing import Any

from pps_core import hookimpl

KEEP = 240


class ExplorerEntity:
    """The explorer's object for one entity (``pps_entity_plugin``): its pages, and the newest ambient_recall
    latencies of this process for its plots."""

    def __init__(self, memory) -> None:
        self.memory = memory
        #: (UTC time, ms) of the newest ambient_recall calls in this process.
        self.recalls: deque[tuple[str, float]] = deque(maxlen=KEEP)

    @hookimpl(optionalhook=True)
    def pps_http_mount(self, app, auth, oauth):
        from starlette.routing import Mount

        from .web import Explorer

        explorer = Explorer(self.memory, auth, app, oauth, plugin=self)
        app.router.routes.append(Mount(explorer.base, app=explorer.app))
        _announce(self.memory, explorer.base)

    @hookimpl
    def pps_operation_called(self, name, ok, ms):
        if name == "ambient_recall" and ok:
            from pps_core.timeutil import now_utc, to_storage

            self.recalls.append((to_storage(now_utc()), ms))

    def recall_latencies(self) -> list[tuple[str, float]]:
        return list(self.recalls)


@hookimpl
def pps_entity_plugin(memory):
    return ExplorerEntity(memory)


def _announce(memory, base: str) -> None:
    """Print the explorer's URL beside the server's start line, once the server publishes its address in the owner
    lock (``<address>/entities/<name>``): pages are mounted before the socket accepts, so a task waits for it."""
    import asyncio

    if _address(memory):
        _print_url(memory, base)
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # mounted outside a server's loop: say where, relative to it
        _print_url(memory, base)
        return
    task = loop.create_task(_announce_when_published(memory, base))
    _ANNOUNCING.add(task)
    task.add_done_callback(_ANNOUNCING.discard)


#: Announcements waiting for their server's address (held so they are not collected).
_ANNOUNCING: set[Any] = set()
ANNOUNCE_WAIT_S = 30.0


async def _announce_when_published(memory, base: str) -> None:
    import asyncio
    import time

    until = time.monotonic() + ANNOUNCE_WAIT_S
    while not _address(memory) and time.monotonic() < until:
        await asyncio.sleep(0.05)
    _print_url(memory, base)


def _address(memory) -> str:
    return str((getattr(memory.lock, "info", None) or {}).get("address") or "")


def _print_url(memory, base: str) -> None:
    import sys

    address = _address(memory)
    root = address.rsplit("/entities/", 1)[0] if "/entities/" in address else address
    where = f"{root}{base}/" if root else f"{base}/ on this server"
    print(f"pps: memory explorer for {memory.settings.entity!r} at {where}", file=sys.stderr, flush=True)


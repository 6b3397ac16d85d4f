"""Entry point of the explorer: mounts its pages on the HTTP transport and keeps recall latencies for the plots."""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

from pps_core import hookimpl

#: The newest ambient_recall latencies per open memory (this process only): (UTC time, ms).
_RECALLS: weakref.WeakKeyDictionary[Any, deque] = weakref.WeakKeyDictionary()
KEEP = 240


@hookimpl(optionalhook=True)
def pps_http_mount(app, memory, auth):
    from starlette.routing import Mount

    from .web import Explorer

    explorer = Explorer(memory, auth)
    app.router.routes.append(Mount(explorer.base, app=explorer.app))
    _announce(memory, explorer.base)


def _announce(memory, base: str) -> None:
    """Print the explorer's URL beside the server's start line (the server's address is in the owner lock by now:
    ``<address>/entities/<name>``)."""
    import sys

    address = str((getattr(memory.lock, "info", None) or {}).get("address") or "")
    root = address.rsplit("/entities/", 1)[0] if "/entities/" in address else address
    where = f"{root}{base}/" if root else f"{base}/ on this server"
    print(f"pps: memory explorer for {memory.settings.entity!r} at {where}", file=sys.stderr, flush=True)


@hookimpl
def pps_operation_called(memory, name, params, ok, ms):
    if name == "ambient_recall" and ok:
        from pps_core.timeutil import now_utc, to_storage

        _RECALLS.setdefault(memory, deque(maxlen=KEEP)).append((to_storage(now_utc()), ms))


def recall_latencies(memory) -> list[tuple[str, float]]:
    return list(_RECALLS.get(memory, ()))

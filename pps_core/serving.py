"""``pps serve <transport>``: serve entities as their owner (or as a channel that forwards to it).

Once for every transport: the options every transport shares, one plugin manager per process start, opening or
forwarding (:mod:`pps_core.reach`), the owner lock, a private umask, logging to stderr, the local channel that
lets other processes reach an owner whatever its transport (:mod:`pps_core.channel`), stopping on SIGTERM/SIGINT
and closing the stores after, and errors as one line (exit code 2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import PPSError

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

    from .reach import Entity
    from .settings import EntitySettings
    from .transport import Served, Transport

log = logging.getLogger("pps")

#: After SIGTERM/SIGINT, how long a transport may take to stop before the stores are closed under it.
STOP_GRACE_S = 5.0


def entity_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entity", "-e", help="entity name (default: $PPS_ENTITY or 'default')")
    parser.add_argument("--home", help="entity home directory (default: ~/.pps/<entity>, or $PPS_HOME)")


def transports_of(pm: pluggy.PluginManager) -> dict[str, Transport]:
    return {t.name: t for batch in pm.hook.pps_transports() for t in batch or []}


def serve_command(name: str, argv: list[str], entity: str | None, home: str | None) -> int:
    """Run ``pps serve <name> ARGV`` to the end; returns the exit code."""
    from .settings import load_settings

    given = argparse.ArgumentParser(add_help=False)  # `pps serve mcp --entity lyra`: options after the name
    entity_args(given)
    given.add_argument("--entities")
    after, _ = given.parse_known_args(argv)
    entity, home = after.entity or entity, after.home or home
    names = [n.strip() for n in (after.entities or "").split(",") if n.strip()]
    if names and entity is None and home is None:  # `--entities a,b` alone: the first is the primary one
        entity = names[0]
    try:
        settings = load_settings(entity, home, must_exist=True)
    except PPSError as exc:
        print(f"pps: error: {exc.message}", file=sys.stderr)
        return 2
    return run(name, settings, argv)


def run(name: str, settings: EntitySettings, argv: list[str], *,
        on_served: Callable[[Served], bool] | None = None, idle_s: float = 0.0) -> int:
    """Serve ``settings``' entity with the transport ``name`` (one of its plugins), ``argv`` its options, until
    stopped; returns the exit code. For a process that serves on demand (the Claude Code hooks' server):
    ``on_served(served)`` runs once the entities are reached, before the transport starts (False: stop at
    once, exit code 0); ``idle_s`` > 0 stops the server once no call has run for that many seconds."""
    from .plugins import build_plugin_manager
    from .settings import load_settings

    prefix = f"pps serve {name}: error: "
    try:
        pm = build_plugin_manager(settings.plugins)  # the one this process starts with: the entity opens on it
    except PPSError as exc:
        print(prefix + exc.message, file=sys.stderr)
        return 2
    transports = transports_of(pm)
    transport = transports.get(name)
    if transport is None:
        known = ", ".join(sorted(transports)) or "none"
        print(f"pps: error: no transport named {name!r} loaded for entity {settings.entity!r} "
              f"(loaded: {known}; add its plugin to the entity's plugins)", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog=f"pps serve {transport.name}", description=transport.help)
    entity_args(parser)
    parser.add_argument("--log-level", default="warning", help="log level (logs go to stderr; default warning)")
    if transport.multi_entity:
        parser.add_argument("--entities", help="comma-separated entity names to serve beside --entity")
    if transport.forwards:
        parser.add_argument("--local", action="store_true",
                            help="never forward: own the stores (fails if a server owns them)")
    transport.add_arguments(parser)
    options = parser.parse_args(argv)
    _configure_logging(options.log_level)
    try:
        names = [n.strip() for n in (getattr(options, "entities", None) or "").split(",") if n.strip()]
        all_settings = [settings] + [load_settings(n, must_exist=True) for n in names if n != settings.entity]
        asyncio.run(_serve(transport, all_settings, pm, options, on_served, idle_s))
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:
        err = _pps_error(exc)
        if err is not None:
            print(prefix + err.message, file=sys.stderr)
            return 2
        if isinstance(exc, OSError):  # e.g. a read-only home: the owner lock cannot be taken
            print(f"{prefix}cannot open the entity's home ({exc.strerror or exc}: {exc.filename or ''})",
                  file=sys.stderr)
            return 2
        raise
    return 0


async def _serve(transport: Transport, all_settings: list[EntitySettings], pm: pluggy.PluginManager,
                 options: argparse.Namespace, on_served: Callable[[Served], bool] | None = None,
                 idle_s: float = 0.0) -> None:
    from .channel import Channel
    from .reach import LocalEntity, open_entity
    from .transport import Served

    os.umask(0o077)  # whatever a backend library creates in an entity's home is the owner's alone
    forward = transport.forwards and not getattr(options, "local", False)
    async with contextlib.AsyncExitStack() as stack:
        entities: list[Entity] = []
        for i, settings in enumerate(all_settings):
            entities.append(await stack.enter_async_context(
                open_entity(settings, forward=forward, plugin_manager=pm if i == 0 else None, serving=True)))
        served = Served(entities, pm, options.log_level)
        if on_served is not None and not on_served(served):
            return
        for entity in entities:  # other processes reach an owner on its channel, whatever the transport
            if isinstance(entity, LocalEntity) and entity.memory is not None and entity.memory.lock.held:
                channel = Channel(entity)
                await channel.start()
                stack.push_async_callback(channel.close)  # before the stores close
        main = asyncio.ensure_future(transport.serve(served, options))
        idle = asyncio.ensure_future(_stop_when_idle(served, idle_s)) if idle_s > 0 else None
        try:
            stopped = await _until_stopped(main, served, transport.stop_grace_s)
        finally:
            if idle is not None:
                idle.cancel()
        if not stopped:  # the transport did not stop in time (a thread blocked on stdin): close the stores, leave
            await stack.aclose()
            log.warning("pps serve %s did not stop within %gs; exiting", transport.name, STOP_GRACE_S)
            sys.stderr.flush()
            os._exit(0)


async def _stop_when_idle(served: Served, idle_s: float) -> None:
    """Set ``served.stopping`` once no call has run on any entity for ``idle_s`` seconds (none in flight)."""
    while not served.stopping.is_set():
        await asyncio.sleep(min(5.0, max(0.05, idle_s / 4)))
        if served.idle_for() > idle_s:
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} idle for {idle_s:g}s: stopping", file=sys.stderr,
                  flush=True)
            served.stopping.set()


async def _until_stopped(main: asyncio.Future[None], served: Served, grace: float) -> bool:
    """Wait for the transport to end. On SIGTERM/SIGINT ``served.stopping`` is set;
    the transport gets ``grace`` seconds to stop by itself, then is cancelled. False when it did not end even then
    (a thread blocked on stdin)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, served.stopping.set)
    waiter = asyncio.ensure_future(served.stopping.wait())
    try:
        pending: set[asyncio.Future[Any]] = {main, waiter}
        while not main.done():
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if waiter in done:
                finished: set[asyncio.Future[None]] = set()
                if grace > 0:
                    finished, _ = await asyncio.wait({main}, timeout=grace)
                if not finished:
                    main.cancel()
                    finished, _ = await asyncio.wait({main}, timeout=STOP_GRACE_S)
                if not finished:
                    return False
                break
        if not main.cancelled():
            main.result()
        return True
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        waiter.cancel()


def _configure_logging(level: str) -> None:
    """Logs to stderr (stdout may carry a protocol: stdio MCP)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def _pps_error(exc: BaseException) -> PPSError | None:
    """The PPSError inside ``exc`` (task groups wrap what a task raised), or None."""
    if isinstance(exc, PPSError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _pps_error(inner)
        if found is not None:
            return found
    return None

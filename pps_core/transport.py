"""The transport contract: a wire format and a lifecycle around entities the kernel has already reached.

``pps serve <name>`` finds the transport among the entity's plugins (``pps_transports``), parses the kernel's
options and the transport's own (:meth:`Transport.add_arguments`), opens each entity or forwards to its owner
(:mod:`pps_core.reach`: the owner lock is taken there), then calls :meth:`Transport.serve` with what it
reached. The transport lists and calls operations through each :class:`~pps_core.reach.Entity` as the
:class:`~pps_core.reach.Caller` it sees on its wire; auth, tenancy, limits and the error mapping are the
kernel's. Other processes (``pps call``, the hooks) reach an entity the process owns through the kernel's own
local channel (:mod:`pps_core.channel`), not through the transport: a transport has nothing to do for them.
SIGTERM or SIGINT cancel ``serve``; the kernel closes the stores after it returns.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

    from .reach import Entity


@dataclass
class Served:
    """What a transport serves: the entities reached for this process (the first is the primary one, named by
    ``--entity``), and the plugin manager the process started with (built once)."""

    entities: list[Entity]
    plugin_manager: pluggy.PluginManager
    log_level: str = "warning"
    #: Set by the kernel on SIGTERM/SIGINT: a transport with ``stop_grace_s`` stops taking requests, answers the
    #: ones in flight and returns; past the grace (or at once, without one) ``serve`` is cancelled.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def primary(self) -> Entity:
        return self.entities[0]

    def __iter__(self) -> Iterator[Entity]:
        return iter(self.entities)

    def get(self, name: str) -> Entity | None:
        return next((e for e in self.entities if e.name == name), None)

    def idle_for(self) -> float:
        """Seconds since the last call on any of the entities ended; 0 while one runs."""
        return min((e.idle_for() for e in self.entities), default=0.0)


class Transport:
    """Subclass it, set ``name`` and ``help``, implement :meth:`serve`; return an instance from ``pps_transports``."""

    #: ``pps serve <name>``.
    name: str = ""
    #: One line for ``pps serve <name> --help``.
    help: str = ""
    #: When another process owns the entity, forward every call to it instead of failing on the owner lock
    #: (``--local`` turns it off). For a channel beside a server (stdio MCP); an owner (HTTP) leaves it False.
    forwards: bool = False
    #: Serves several entities in one process (``--entities a,b`` beside ``--entity``).
    multi_entity: bool = False
    #: Seconds the transport may take to stop by itself once ``served.stopping`` is set (it watches it and
    #: answers what is in flight); 0: it is cancelled at once.
    stop_grace_s: float = 0.0

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the transport's own options (``--entity``, ``--home``, ``--log-level`` and, as the flags above
        say, ``--entities`` and ``--local`` are the kernel's)."""

    async def serve(self, served: Served, options: argparse.Namespace) -> None:
        """Serve until stopped (return, or be cancelled by SIGTERM/SIGINT). Raise a PPSError to fail with its
        message (exit code 2)."""
        raise NotImplementedError

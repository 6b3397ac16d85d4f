"""The turn domain of PPS: turns and summaries over any store that implements :class:`TurnStore`.

A store adapter (``pps_sqlite``, ``pps_postgres``, ``examples/pps_memstore``) implements :class:`TurnStore` and
nothing else; its plugin module is two hooks::

    @hookimpl
    def pps_layers(memory):
        return pps_turns.build(memory, MyStore(memory)).layers()

    @hookimpl
    def pps_operations(memory):
        return pps_turns.operations_for_memory()

That gives the entity the ``raw_capture`` and ``message_summaries`` layers, every turn operation (capture,
search, summaries, navigation, channels, forgetting) and the fused turn search. ``pps_turns.testing`` holds the
suites a store must pass.
"""

from __future__ import annotations

from typing import Any

from .lineage import turn_copies
from .service import TurnDomain, build, for_memory, operations
from .store import (
    ArchivableTurnStore,
    BrowsableTurnStore,
    GlanceableStore,
    TurnStore,
    context_plan,
    forgotten_ack,
    message_id_digest,
    tombstones,
    turn_digest,
)

__all__ = ["ArchivableTurnStore", "BrowsableTurnStore", "GlanceableStore", "TurnDomain", "TurnStore", "build",
           "context_plan", "for_memory", "forgotten_ack", "message_id_digest", "operations", "operations_for_memory",
           "tombstones", "turn_copies", "turn_digest"]


def _domain_of(memory: Any) -> TurnDomain:
    domain = for_memory(memory)
    if domain is None:
        from pps_core.errors import Unavailable

        raise Unavailable("no turn store is loaded for this entity (list a store plugin such as 'sqlite')")
    return domain


def operations_for_memory() -> list[Any]:
    """The turn operations, each running on the turn domain its memory's store adapter built."""
    return operations(_domain_of)

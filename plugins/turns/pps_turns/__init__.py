"""The turn domain of PPS: turns and summaries over any store that implements :class:`TurnStore`.

A store adapter (``pps_sqlite``, ``pps_postgres``, ``examples/pps_memstore``) implements :class:`TurnStore` and
nothing else; its plugin module is one hook, which gives the entity its own :class:`TurnPlugin`::

    @hookimpl
    def pps_entity_plugin(memory):
        return pps_turns.TurnPlugin(memory, MyStore.for_memory)

That gives the entity the ``raw_capture`` and ``message_summaries`` layers, every turn operation (capture,
search, summaries, navigation, channels, forgetting) and the fused turn search. ``pps_turns.testing`` holds the
suites a store must pass.
"""

from __future__ import annotations

from .lineage import turn_copies
from .service import TurnDomain, TurnPlugin, operations
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

__all__ = ["ArchivableTurnStore", "BrowsableTurnStore", "GlanceableStore", "TurnDomain", "TurnPlugin", "TurnStore",
           "context_plan", "forgotten_ack", "message_id_digest", "operations", "tombstones", "turn_copies",
           "turn_digest"]


"""Plugin ``recap`` (distribution pps-recap): session recaps (reference/004).

Provides the ``session_recap`` operation, the ``session_recap`` startup layer (the last session's
recap, shown first at startup) and the ``pps recap`` command, and declares the recap as a copy of turns
(``pps_turn_copies``: forgetting turns removes it, from the home or from PostgreSQL).
"""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_layers(memory):
    from .service import RecapLayer

    return [RecapLayer(memory)]


@hookimpl
def pps_operations(memory):
    from pps_core.catalog import Operation

    from .service import SessionRecapParams, session_recap

    return [Operation(
        name="session_recap", params=SessionRecapParams, handler=session_recap, group="recap",
        description=("Recap a session log (mindloop-style JSONL or a Claude Code transcript; default: the newest "
                     "log): tool calls collapsed, similar stretches merged, summarized by the configured LLM (or "
                     "extractively offline), the most recent selected within a token budget (default 1000), "
                     "in chronological order with real timestamps. Saved as _recap.md, shown at startup."))]


@hookimpl
def pps_turn_copies(memory):
    """The saved recap is a copy of a session's turns (a narrative of them, maybe written by an LLM)."""
    import asyncio

    from pps_core.lineage import TurnCopy

    from . import store

    async def forget(_turns):
        await asyncio.to_thread(store.remove, memory.settings)

    return [TurnCopy(
        "session recap", store.describe(memory.settings), forget=forget,
        how=("removed at every forget whatever turns it names (a recap is a narrative of a whole session, from "
             "which a turn cannot be cut reliably; the next session's end writes a new one)"))]


@hookimpl
def pps_register_commands(cli):
    from .cli import add_commands

    add_commands(cli)

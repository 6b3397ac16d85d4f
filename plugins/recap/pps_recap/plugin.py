"""Plugin ``recap`` (distribution pps-recap): session recaps (reference/004).

Provides the ``session_recap`` operation, the ``session_recap`` startup layer (the last session's
recap, shown first at startup) and the ``pps recap`` command. The recap is a copy of turns, declared to the
forget lineage (``pps_turn_copies``): forgetting any turn removes it (from the home, or its row in PostgreSQL
with ``[recap] store = "postgres"``).
"""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 60
#: The chat model that summarizes (``pps_chat_model``) comes from the ``llm`` plugin: loaded with this one.
PPS_REQUIRES = ("llm",)


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
def pps_register_commands(cli):
    from .cli import add_commands

    add_commands(cli)


@hookimpl
def pps_turn_copies(memory):
    """``_recap.md`` (and its sidecar) summarizes session logs, the turns' own source: it cannot tell which of
    its lines came from a forgotten turn (an LLM wrote them), so forgetting any turn removes it, and what the
    logs held then is never recapped again (``store.forget``)."""
    import asyncio

    from pps_core.lineage import TurnCopy

    from . import store

    async def forget(turns):
        await asyncio.to_thread(store.forget, memory.settings)

    return [TurnCopy("session recap", store.describe(memory.settings), forget=forget,
                     how="the recap is deleted (a row in PostgreSQL: deleted and the table rewritten), and what the "
                         "session logs held then is never recapped again (a recap is made only of what is said "
                         "after the forget)")]

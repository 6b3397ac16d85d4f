"""Plugin ``recap`` (distribution pps-recap): session recaps (reference/004).

Provides the ``session_recap`` operation, the ``session_recap`` startup layer (the last session's
recap, shown first at startup) and the ``pps recap`` command.
"""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 60


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

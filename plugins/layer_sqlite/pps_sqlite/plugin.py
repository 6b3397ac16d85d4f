"""Entry point of the sqlite plugin: the turn domain (``pps_turns``: the raw_capture and message_summaries layers
and their operations) on a SQLite store."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 10


@hookimpl
def pps_entity_plugin(memory):
    import pps_turns

    from .store import SQLiteStore

    return pps_turns.TurnPlugin(memory, SQLiteStore.for_memory)


@hookimpl
def pps_turn_copies(memory):
    import pps_turns

    from .db import SQLiteSettings

    file = memory.settings.plugin_settings(SQLiteSettings, "sqlite").file
    return pps_turns.turn_copies(f"<home>/{file}", f"<home>/{file}.turns.usearch (and .turns.json)")


@hookimpl
def pps_resources(settings):
    from pps_turns import published

    return published.resources()


@hookimpl
def pps_prompts(settings):
    from pps_turns import published

    return published.prompts()

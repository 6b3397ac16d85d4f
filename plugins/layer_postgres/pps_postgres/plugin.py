"""Entry point of the postgres plugin: the turn domain (``pps_turns``: the raw_capture and message_summaries layers
and their operations) on a PostgreSQL store."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_entity_plugin(memory):
    import pps_turns

    from .store import PostgresStore

    return pps_turns.TurnPlugin(memory, PostgresStore.for_memory)


@hookimpl
def pps_turn_copies(memory):
    import pps_turns

    return pps_turns.turn_copies("the PostgreSQL database (messages, message_summaries, their vectors and indexes)")


@hookimpl
def pps_resources(settings):
    from pps_turns import published

    return published.resources()


@hookimpl
def pps_prompts(settings):
    from pps_turns import published

    return published.prompts()


@hookimpl
def pps_register_commands(cli):
    from .upgrade import register

    register(cli)

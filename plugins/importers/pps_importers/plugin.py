"""Plugin ``importers`` (distribution pps-importers): ``pps import chatgpt|claude-ai|pps`` and ``pps export``.

It adds no layer or operation, so an entity need not list it: the commands exist when it is installed. Every
turn goes in through the entity's ``store_messages`` operation (its server's, when one runs), so the
``<private>`` filter, idempotence by ``message_id`` and whatever the turn store refuses apply as to any capture.
"""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_register_commands(cli):
    from .cli import add_commands

    add_commands(cli)

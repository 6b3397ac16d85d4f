"""Plugin ``claude_code`` (distribution pps-claude-code): the ``pps hooks``, ``pps hook`` and ``pps import``
commands. It adds no layer or operation, so an entity need not list it: the commands exist when it is installed."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_register_commands(cli):
    from .cli import add_commands

    add_commands(cli)

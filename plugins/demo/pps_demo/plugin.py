"""Plugin ``demo``: the ``pps demo`` command."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_register_commands(cli) -> None:
    from .demo import cmd_demo

    p = cli.add("demo", cmd_demo, help="a demo entity on the embedded defaults: a short conversation, then what "
                                       "it remembers")
    p.add_argument("--home", help="entity home (default: the entity 'demo' in the PPS root, ~/.pps/demo; recreated "
                                  "each run, never a folder that is not a demo)")

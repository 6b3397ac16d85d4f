"""Plugin ``demo``: the ``pps demo`` command."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_register_commands(cli) -> None:
    from .demo import cmd_demo

    p = cli.add("demo", cmd_demo, help="a demo entity on the embedded defaults: a short conversation, then what "
                                       "it remembers")
    p.add_argument("--home", default=".demo/lyra", help="entity home (default ./.demo/lyra, recreated each run)")

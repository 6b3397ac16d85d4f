"""Built-in plugin ``builtin:maintenance``: backup, restore and reindex (operations and commands)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..catalog import Operation
from ..hookspecs import hookimpl
from . import backup, reindex

if TYPE_CHECKING:  # pragma: no cover
    from ..cli import CommandRegistry
    from ..memory import Memory


@hookimpl
def pps_operations(memory: Memory) -> list[Operation]:
    return [reindex.reindex_operation(), backup.backup_operation()]


@hookimpl
def pps_memory_opened(memory: Memory) -> None:
    """What backups killed half-way left beside their archives (in the home's backups folder, or an allowed one) is
    removed when the entity opens: no later forget would reach those copies."""
    folders = [backup.backup_dir(memory)] + [Path(d).expanduser() for d in memory.settings.backup.allowed_dirs]
    for folder in folders:
        backup.clean_leftovers(folder)


@hookimpl
def pps_register_commands(cli: CommandRegistry) -> None:
    backup.add_commands(cli)
    reindex.add_commands(cli)

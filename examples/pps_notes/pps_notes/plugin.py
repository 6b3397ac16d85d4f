"""The plugin module named by the entry point: hook implementations only (keep imports light)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pps_core import Layer, Memory, Operation, Params, Unavailable, hookimpl
from pps_core.privacy import CapturedText

from .layer import NotesLayer, NotesSettings


class NoteAdd(Params):
    content: CapturedText = Field(..., max_length=10_000, description="the note")


class NotesList(Params):
    offset: int = Field(0, ge=0, description="notes to skip, newest first")
    limit: int = Field(20, ge=1, le=1000, description="most notes to return")


def _layer(memory: Memory) -> NotesLayer:
    layer = memory.layer("notes")
    if not isinstance(layer, NotesLayer):  # its file could not be read: the layer is reported unavailable
        raise Unavailable("the notes layer is not available (see pps_health)")
    return layer


async def note_add(memory: Memory, p: NoteAdd) -> dict[str, Any]:
    note = await _layer(memory).add(p.content)
    return {"id": note["id"], "created_at": note["created_at"]}


async def notes_list(memory: Memory, p: NotesList) -> dict[str, Any]:
    layer = _layer(memory)
    return {"notes": layer.newest(p.offset, p.limit), "total": layer.count()}


@hookimpl
def pps_init_hints() -> list[str]:
    """What `pps init` writes into a new entity's pps.toml for this plugin (commented out)."""
    return ["# [notes]", '# file = "notes.json"   # under the entity\'s home', "# startup_count = 5"]


@hookimpl
def pps_layers(memory: Memory) -> list[Layer]:
    settings = memory.settings.plugin_settings(NotesSettings, "notes")
    return [NotesLayer(memory.home, settings)]


@hookimpl
def pps_operations(memory: Memory) -> list[Operation]:
    return [
        Operation(name="note_add", params=NoteAdd, handler=note_add, group="notes",
                  description="Save a short note. It is searched by ambient_recall and shown at startup."),
        Operation(name="notes_list", params=NotesList, handler=notes_list, group="notes", read_only=True,
                  idempotent=True, description="Notes, newest first, one page (offset, limit) and the total."),
    ]

"""The plugin module named by the entry point: hook implementations only (keep imports light)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pps_core import Layer, Memory, Operation, Params, hookimpl
from pps_core.privacy import CapturedText

from .layer import NotesLayer, NotesSettings


class NoteAdd(Params):
    content: CapturedText = Field(..., max_length=10_000, description="the note")


class NotesList(Params):
    offset: int = Field(0, ge=0, description="notes to skip, newest first")
    limit: int = Field(20, ge=1, le=1000, description="most notes to return")


class Notes:
    """This plugin for one entity: the layer it builds and the operations that run on that layer."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.layer = NotesLayer(memory.home, memory.settings.plugin_settings(NotesSettings, "notes"))

    @hookimpl
    def pps_layers(self) -> list[Layer]:
        return [self.layer]

    @hookimpl
    def pps_operations(self) -> list[Operation]:
        async def note_add(memory: Memory, p: NoteAdd) -> dict[str, Any]:
            note = await memory.require(self.layer).add(p.content)  # Unavailable if its file could not be read
            return {"id": note["id"], "created_at": note["created_at"]}

        async def notes_list(memory: Memory, p: NotesList) -> dict[str, Any]:
            layer = memory.require(self.layer)
            return {"notes": layer.newest(p.offset, p.limit), "total": layer.count()}

        return [
            Operation(name="note_add", params=NoteAdd, handler=note_add, group="notes",
                      description="Save a short note. It is searched by ambient_recall and shown at startup."),
            Operation(name="notes_list", params=NotesList, handler=notes_list, group="notes", read_only=True,
                      idempotent=True, description="Notes, newest first, one page (offset, limit) and the total."),
        ]


@hookimpl
def pps_entity_plugin(memory: Memory) -> Notes:
    return Notes(memory)


@hookimpl
def pps_init_hints() -> list[str]:
    """What `pps init` writes into a new entity's pps.toml for this plugin (commented out)."""
    return ["# [notes]", '# file = "notes.json"   # under the entity\'s home', "# startup_count = 5"]

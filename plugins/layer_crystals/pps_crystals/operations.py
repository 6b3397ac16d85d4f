"""crystallize, get_crystals, crystal_list, crystal_delete."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from pps_core import Operation


class CrystallizeParams(BaseModel):
    model_config = {"extra": "forbid"}
    content: str = Field(..., min_length=1, max_length=200_000, description="the crystal's markdown")

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        if "\x00" in v:
            raise ValueError("must not contain NUL characters")
        return v


class GetCrystalsParams(BaseModel):
    model_config = {"extra": "forbid"}
    count: int = Field(4, ge=0, le=1000, description="how many of the newest crystals, oldest first")


class NoParams(BaseModel):
    model_config = {"extra": "forbid"}


def _layer(memory):
    return memory.require_layer("crystallization")


async def crystallize(memory, p: CrystallizeParams):
    layer = _layer(memory)
    path, window = await layer.run_locked(lambda: (layer.create(p.content), layer.current()))
    return {"created": path.name, "chars": len(p.content), "window": [q.name for _n, q in window]}


async def get_crystals(memory, p: GetCrystalsParams):
    results = await _layer(memory).recent(p.count)
    return {"count": len(results), "crystals": [{"name": r.source, "content": r.content, "modified": r.timestamp}
                                                for r in results]}


async def crystal_list(memory, _p: NoParams):
    layer = _layer(memory)
    current, archived = await layer.run_locked(lambda: (layer.current(), layer.archived()))
    return {"current": [p.name for _n, p in current], "archived": [p.name for _n, p in archived],
            "window": layer.settings.window}


async def crystal_delete(memory, _p: NoParams):
    layer = _layer(memory)
    path, current = await layer.run_locked(lambda: (layer.delete_newest(), layer.current()))
    return {"deleted": path.name, "current": [q.name for _n, q in current]}


def operations() -> list[Operation]:
    return [
        Operation("crystallize", CrystallizeParams, crystallize, group="crystals", idempotent=False,
                  description="Save a new crystal (the next crystal_NNN.md). The window keeps the newest "
                              "crystals; older ones move to the archive, never deleted."),
        Operation("get_crystals", GetCrystalsParams, get_crystals, group="crystals", read_only=True,
                  idempotent=True, description="The newest crystals, oldest first, with their full text."),
        Operation("crystal_list", NoParams, crystal_list, group="crystals", read_only=True, idempotent=True,
                  description="Names of the crystals in the window and in the archive."),
        Operation("crystal_delete", NoParams, crystal_delete, group="crystals", destructive=True,
                  description="Delete the newest crystal (only the newest may be deleted; it is kept under "
                              "crystals/deleted/)."),
    ]

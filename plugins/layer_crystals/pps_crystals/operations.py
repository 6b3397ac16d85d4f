"""crystallize, get_crystals, crystal_list, crystal_delete, crystal_forget."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel, Field, field_validator

from pps_core import Operation
from pps_core.privacy import CapturedText


class CrystallizeParams(BaseModel):
    model_config = {"extra": "forbid"}
    content: CapturedText = Field(..., min_length=1, max_length=200_000,
                                  description="the crystal's markdown (<private>...</private> spans dropped)")


class GetCrystalsParams(BaseModel):
    model_config = {"extra": "forbid"}
    count: int = Field(4, ge=0, le=1000, description="how many of the newest crystals, oldest first")


class NoParams(BaseModel):
    model_config = {"extra": "forbid"}


async def crystallize(layer_of, memory, p: CrystallizeParams):
    return await layer_of().crystallize(p.content)


async def get_crystals(layer_of, memory, p: GetCrystalsParams):
    results = await layer_of().recent(p.count)
    return {"count": len(results), "crystals": [{"name": r.source, "content": r.content, "modified": r.timestamp}
                                                for r in results]}


async def crystal_list(layer_of, memory, _p: NoParams):
    return await layer_of().listing()


async def crystal_delete(layer_of, memory, _p: NoParams):
    return await layer_of().delete_newest_op()


class ForgetCrystalParams(BaseModel):
    model_config = {"extra": "forbid"}
    name: str = Field(..., min_length=1, max_length=100, description="the crystal's file name, e.g. 'crystal_005.md'")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        from .layer import NAME

        if not NAME.match(v):
            raise ValueError("a crystal's file name, e.g. 'crystal_005.md' (crystal_list shows them)")
        return v


def _forget(layer, name: str) -> dict:
    """Delete a crystal for good wherever it is (window, archive, deleted/). An empty file of that name stays in
    deleted/ so its number is never given to a new crystal; the window is refilled from the archive."""
    from .layer import _move

    places = [layer.dir / name, layer.archive / name, layer.trash / name]
    found = [p for p in places if p.is_file() and p.stat().st_size > 0]
    if not found:
        from pps_core.errors import NotFound

        raise NotFound(f"crystal_forget: no crystal named {name!r} (crystal_list shows them)", param="name")
    in_window = places[0].is_file()
    for p in found:
        p.unlink()
    layer.trash.mkdir(parents=True, exist_ok=True, mode=0o700)
    (layer.trash / name).touch(mode=0o600)  # a tombstone: no content, the number stays used
    arch = layer.archived()
    if in_window and arch and len(layer.current()) < layer.settings.window:
        _move(arch[-1][1], layer.dir)
    return {"forgotten": name, "from": [str(p.parent.relative_to(layer.dir.parent)) for p in found],
            "current": [q.name for _n, q in layer.current()]}


async def crystal_forget(layer_of, memory, p: ForgetCrystalParams):
    return await layer_of().forget(p.name)


def operations(layer_of: Callable[[], Any]) -> list[Operation]:
    """The crystal operations, each run on ``layer_of()`` (the entity's open crystal layer, else Unavailable)."""

    def h(handler):
        return partial(handler, layer_of)

    return [
        Operation("crystallize", CrystallizeParams, h(crystallize), group="crystals", essential=True, idempotent=False,
                  description="Save a new crystal (the next crystal_NNN.md). The window keeps the newest "
                              "crystals; older ones move to the archive, never deleted."),
        Operation("get_crystals", GetCrystalsParams, h(get_crystals), group="crystals", essential=True, read_only=True,
                  idempotent=True, description="The newest crystals, oldest first, with their full text."),
        Operation("crystal_list", NoParams, h(crystal_list), group="crystals", read_only=True, idempotent=True,
                  description="Names of the crystals in the window and in the archive."),
        Operation("crystal_delete", NoParams, h(crystal_delete), group="crystals", destructive=True,
                  description="Delete the newest crystal (only the newest may be deleted; it is kept under "
                              "crystals/deleted/)."),
        Operation("crystal_forget", ForgetCrystalParams, h(crystal_forget), group="crystals", destructive=True,
                  description="Forget any crystal by file name, for good: from the window, the archive and "
                              "crystals/deleted/ (no copy kept; its number is never reused)."),
    ]

"""Built-in plugin ``builtin:health``: pps_health and pps_regenerate_token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .. import auth
from ..catalog import Operation
from ..hookspecs import hookimpl
from ..plugins import describe

if TYPE_CHECKING:  # pragma: no cover
    from ..memory import Memory


class NoParams(BaseModel):
    model_config = {"extra": "forbid"}


async def pps_health(memory: Memory, _p: NoParams) -> dict[str, Any]:
    layers = await memory.health()
    return {
        "entity": memory.settings.entity,
        "ok": all(h.available for h in layers.values()),
        "layers": {name: h.model_dump() for name, h in layers.items()},
        "plugins": [{"name": p["name"], "version": p["version"]} for p in describe(memory.pm)] if memory.pm else [],
        "operations": len(memory.catalog),
        "llm_configured": memory.chat_model() is not None,
    }


async def pps_regenerate_token(memory: Memory, _p: NoParams) -> dict[str, Any]:
    from ..contracts import SharedValues

    old = auth.read_token(memory.home)
    auth.write_token(memory.home)
    for store in memory.find(SharedValues)[:1]:  # several servers: every one refuses the old token
        await auth.sync_fleet_token(store, auth.TokenGate(memory.settings.entity, memory.home), rotated_from=old)
    memory.events.operation_called(name="token_rotated", params={}, ok=True, ms=0.0)
    return {"rotated": True, "token_file": str(auth.token_path(memory.home)),
            "message": "token rotated; read it with `pps token` (it is never returned over the wire)"}


async def turn_copies(memory: Memory, _p: NoParams) -> dict[str, Any]:
    copies = memory.lineage.describe()
    return {"entity": memory.settings.entity, "count": len(copies), "copies": copies,
            "note": "every place this entity's plugins keep text derived from turns, and what forgetting a turn "
                    "does to it (pps_core.lineage)"}


@hookimpl
def pps_operations(memory: Memory) -> list[Operation]:
    return [
        Operation(name="turn_copies", params=NoParams, handler=turn_copies, group="health", read_only=True,
                  idempotent=True,
                  description="Every copy this entity keeps of text derived from turns (declared by its plugins) and "
                              "how forgetting reaches it."),
        Operation(name="pps_health", params=NoParams, handler=pps_health, group="health", read_only=True,
                  idempotent=True, description="Health of every layer: available, why not, counts, backlog, latency."),
        Operation(name="pps_regenerate_token", params=NoParams, handler=pps_regenerate_token, group="auth",
                  destructive=True, sensitive=True,
                  description="Rotate this entity's bearer token. The old token stops working at once."),
    ]

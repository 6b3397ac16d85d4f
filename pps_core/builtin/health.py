"""Built-in plugin ``builtin:health``: pps_health and pps_regenerate_token."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .. import auth
from ..catalog import Operation
from ..contracts import OwedForgets
from ..hookspecs import hookimpl
from ..plugins import describe

if TYPE_CHECKING:  # pragma: no cover
    from ..memory import Memory


log = logging.getLogger("pps")


class NoParams(BaseModel):
    model_config = {"extra": "forbid"}


async def owed(memory: Memory) -> list[dict[str, Any]]:
    """Every forget a copy still owes (:class:`~pps_core.contracts.OwedForgets`), oldest first; never text."""
    out: list[dict[str, Any]] = []
    for store in memory.find(OwedForgets):
        try:
            out += await store.owed_forgets()
        except Exception as exc:  # the store is down: its health says so
            log.warning("owed forgets could not be read: %s", exc)
    return out


def owed_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    copies: dict[str, int] = {}
    for record in records:
        for key in record.get("copies", []):
            copies[key] = copies.get(key, 0) + 1
    return {"count": len(records), "copies": copies,
            "note": "forgets that a copy (named here) still owes: its text is still there; retried when the entity "
                    "opens, by upkeep and at the next forget until each confirms (turn_copies lists them)"
            if records else "nothing owed: every copy confirmed every forget"}


async def pps_health(memory: Memory, _p: NoParams) -> dict[str, Any]:
    layers = await memory.health()
    return {
        "entity": memory.settings.entity,
        # a layer still warming up (its first answer in this process is not in yet) is not failing
        "ok": all(h.available or h.warming for h in layers.values()),
        "warming": [name for name, h in layers.items() if h.warming],
        "layers": {name: h.model_dump() for name, h in layers.items()},
        "plugins": [{"name": p["name"], "version": p["version"]} for p in describe(memory.pm)] if memory.pm else [],
        "operations": len(memory.catalog),
        "llm_configured": memory.chat_model() is not None,
        # a plugin of the entity can provide a chat model (configured or not): "not configured" rather than "none"
        "llm_providers": bool(memory.pm and memory.pm.hook.pps_chat_model.get_hookimpls()),
        "owed_forgets": owed_summary(await owed(memory)),
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
    records = await owed(memory)
    for copy in copies:
        copy["owed"] = sum(f"{copy['plugin']}/{copy['name']}" in r.get("copies", []) for r in records)
    return {"entity": memory.settings.entity, "count": len(copies), "copies": copies, "owed": records,
            "note": "every place this entity's plugins keep text derived from turns, and what forgetting a turn "
                    "does to it (pps_core.lineage); owed: forgets a copy could not do yet (retried until it "
                    "confirms)"}


@hookimpl
def pps_operations(memory: Memory) -> list[Operation]:
    return [
        Operation(name="turn_copies", params=NoParams, handler=turn_copies, group="health", read_only=True,
                  idempotent=True,
                  description="Every copy this entity keeps of text derived from turns (declared by its plugins), "
                              "how forgetting reaches it, and the forgets a copy still owes (owed: ids, time and "
                              "copies, never text)."),
        Operation(name="pps_health", params=NoParams, handler=pps_health, group="health", read_only=True,
                  idempotent=True, description="Health of every layer: available, why not, counts, backlog, latency; "
                                                     "forgets a copy still owes (owed_forgets)."),
        Operation(name="pps_regenerate_token", params=NoParams, handler=pps_regenerate_token, group="auth",
                  destructive=True, sensitive=True,
                  description="Rotate this entity's bearer token. The old token stops working at once."),
    ]

"""Operations the core itself provides: ambient_recall, pps_health, pps_regenerate_token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from . import auth
from .catalog import Operation
from .recall import AmbientRecallParams, ambient_recall

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory


class NoParams(BaseModel):
    model_config = {"extra": "forbid"}


async def pps_health(memory: Memory, _p: NoParams) -> dict[str, Any]:
    layers = await memory.health()
    from .plugins import describe

    return {
        "entity": memory.settings.entity,
        "ok": all(h.available for h in layers.values()),
        "layers": {name: h.model_dump() for name, h in layers.items()},
        "plugins": [{"name": p["name"], "version": p["version"]} for p in describe(memory.pm)],
        "operations": len(memory.catalog),
        "llm_configured": memory.settings.llm.configured,
    }


async def pps_regenerate_token(memory: Memory, _p: NoParams) -> dict[str, Any]:
    auth.write_token(memory.home)
    memory.notify("pps_operation_called", name="token_rotated", params={}, ok=True, ms=0.0)
    return {"rotated": True, "token_file": str(auth.token_path(memory.home)),
            "message": "token rotated; read it with `pps token` (it is never returned over the wire)"}


def core_operations() -> list[Operation]:
    return [
        Operation(
            name="ambient_recall", params=AmbientRecallParams, handler=ambient_recall, group="recall",
            read_only=True, idempotent=True,
            description=(
                "Recall memory for the current moment. context='startup' returns the startup package "
                "(recency, no search): clock, memory health, manifest, newest crystals and word-photos, "
                "newest summaries and ALL unsummarized turns. Any other context searches every layer "
                "concurrently and returns fused, ranked results. Optional budget caps the characters "
                "returned and lists what was left out with the call that fetches it."),
        ),
        Operation(name="pps_health", params=NoParams, handler=pps_health, group="health", read_only=True,
                  idempotent=True, description="Health of every layer: available, why not, counts, backlog, latency."),
        Operation(name="pps_regenerate_token", params=NoParams, handler=pps_regenerate_token, group="auth",
                  destructive=True, sensitive=True,
                  description="Rotate this entity's bearer token. The old token stops working at once."),
        _upkeep_operation(),
        *_maintenance_operations(),
    ]


def _maintenance_operations() -> list[Operation]:
    from .backup import backup_operation
    from .reindex import reindex_operation

    return [reindex_operation(), backup_operation()]


def _upkeep_operation() -> Operation:
    from .upkeep import UpkeepParams, run_upkeep

    return Operation(
        name="pps_upkeep", params=UpkeepParams, handler=run_upkeep, group="summaries",
        description=("Summarize the oldest unsummarized turns with the configured LLM, batch by batch, until at "
                     "most `target` remain (speaker names kept verbatim; each summary marks exactly its turns), "
                     "then ingest queued turns into the graph if loaded. Without an LLM it says so; an agent can "
                     "still summarize with summarize_messages + store_summary."))


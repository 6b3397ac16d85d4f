"""Automatic upkeep: retry the forgets a copy still owes, then, with an LLM, summarize the oldest turns until the
backlog is under target and ingest the graph.

``pps upkeep`` runs it once; ``[upkeep] interval_s`` makes a serving process run it periodically.
Without an LLM it says so: ``summarize_messages`` + ``store_summary`` stay the path for an agent
that summarizes itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from pps_core import PluginSettings, PPSError, Unavailable
from pps_core.contracts import Ingester, OwedForgets, SummarizableStore

if TYPE_CHECKING:  # pragma: no cover
    from pps_core import Memory

log = logging.getLogger("pps.upkeep")

SYSTEM = (
    "You summarize a stretch of conversation for a long-term memory. Write a faithful summary in a few "
    "sentences. Name speakers exactly as written before each colon (never rename or merge them). "
    "Say only what the turns say: add no facts, guesses or feelings they do not state. "
    "Answer with the summary only.")


class UpkeepSettings(PluginSettings):
    """``[upkeep]`` in pps.toml (or ``PPS_UPKEEP_*``)."""

    model_config = {"env_prefix": "PPS_UPKEEP_", "extra": "ignore"}

    target_unsummarized: int = Field(50, ge=0, description="upkeep summarizes until at most this many remain")
    batch_size: int = Field(50, ge=2, le=500, description="turns per automatic summary")
    interval_s: float | None = Field(None, gt=0, description="a serving process runs upkeep this often")


class UpkeepParams(BaseModel):
    model_config = {"extra": "forbid"}

    target: int | None = Field(None, ge=0, le=1_000_000, description="stop when unsummarized turns are at most this")
    batch_size: int | None = Field(None, ge=2, le=500, description="turns per summary")
    max_batches: int = Field(20, ge=1, le=1000, description="most summaries written in this run")
    ingest: bool = Field(True, description="also ingest queued turns into the graph layer, if loaded")


async def settle_owed(memory: Memory) -> dict[str, Any] | None:
    """Retry every forget a copy still owes (a graph that was down); None when the entity's store records none."""
    done: dict[str, Any] | None = None
    for store in memory.find(OwedForgets):
        async with memory.writing():  # held by an operation already; the loop takes it as any write does
            one = await store.settle_owed_forgets()
        if done is None:
            done = one
        else:
            done = {"settled": done["settled"] + one["settled"], "owed": done["owed"] + one["owed"],
                    "pending": {**done["pending"], **one["pending"]},
                    "incomplete": done["incomplete"] + one["incomplete"]}
    return done


async def run_upkeep(memory: Memory, p: UpkeepParams) -> dict[str, Any]:
    from pps_core.chat import require_chat_model

    owed = await settle_owed(memory)  # first, and without an LLM too: a forget owed is text still kept
    cfg = memory.settings.plugin_settings(UpkeepSettings, "upkeep")
    target = cfg.target_unsummarized if p.target is None else p.target
    size = p.batch_size or cfg.batch_size
    stores = memory.find(SummarizableStore)
    if not stores:
        raise Unavailable("upkeep needs a layer that keeps summarizable turns (the 'sqlite' plugin has one)")
    store = stores[0]
    client = require_chat_model(memory.pm, memory.settings)  # Unavailable when no plugin provides one
    written: list[int] = []
    covered = 0
    remaining = await store.unsummarized_count()
    while remaining > target and len(written) < p.max_batches:
        batch = await store.next_to_summarize(max(2, min(size, remaining - target)))
        if not batch.ids:
            break
        text = await asyncio.to_thread(client.complete, SYSTEM, batch.transcript)
        stored = await store.save_summary(text, batch.ids)
        written.append(stored.id)
        covered += stored.message_count
        remaining = await store.unsummarized_count()
    graph: list[dict[str, Any]] = []
    if p.ingest:
        for ingester in memory.find(Ingester):
            try:
                graph.append(await ingester.ingest_pending())
            except PPSError as exc:
                graph.append({"error": exc.message})
    return {"summaries_written": len(written), "summary_ids": written, "turns_covered": covered,
            "unsummarized_count": remaining, "target": target, "graph": graph[0] if len(graph) == 1 else (graph or None),
            "owed_forgets": owed}


class UpkeepLoop:
    """Runs upkeep every ``interval_s`` in a serving process; failures are logged, never fatal. Where several
    servers share the entity, one at a time runs a round (``memory.claim("upkeep")``)."""

    def __init__(self, memory: Memory, interval_s: float) -> None:
        self.memory = memory
        self.interval_s = interval_s
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="pps-upkeep")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if self.memory.chat_model() is None:  # nothing to summarize with: only what forgets still owe
                try:
                    await settle_owed(self.memory)
                except Exception as exc:
                    log.warning("upkeep: retrying owed forgets failed: %s", exc)
                continue
            try:
                # several servers on one entity: one of them runs each round (the others skip it), so no two
                # summarize the same turns or ingest the same ones into the graph
                async with self.memory.claim("upkeep") as mine:
                    if not mine:
                        continue
                    result = await run_upkeep(self.memory, UpkeepParams())
                if result["summaries_written"]:
                    log.info("upkeep wrote %d summaries", result["summaries_written"])
            except Exception as exc:  # keep serving; say why
                log.warning("upkeep failed: %s", exc)

    def stop_soon(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None


def cmd_upkeep(args: Any) -> int:
    import json

    from pps_core.client import run_call

    params = {k: v for k, v in {"target": args.target, "batch_size": args.batch_size}.items() if v is not None}
    print(json.dumps(run_call(args, "pps_upkeep", params), indent=2))
    return 0

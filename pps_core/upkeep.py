"""Automatic upkeep with an LLM: summarize the oldest turns until the backlog is under target, ingest the graph.

``pps upkeep`` runs it once; ``[upkeep] interval_s`` makes a serving process run it periodically.
Without an LLM it says so: ``summarize_messages`` + ``store_summary`` stay the path for an agent
that summarizes itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from .errors import PPSError, Unavailable

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory

log = logging.getLogger("pps.upkeep")

SYSTEM = (
    "You summarize a stretch of conversation for a long-term memory. Write a faithful summary in a few "
    "sentences. Name speakers exactly as written before each colon (never rename or merge them). "
    "Say only what the turns say: add no facts, guesses or feelings they do not state. "
    "Answer with the summary only.")


class UpkeepParams(BaseModel):
    model_config = {"extra": "forbid"}

    target: int | None = Field(None, ge=0, le=1_000_000, description="stop when unsummarized turns are at most this")
    batch_size: int | None = Field(None, ge=2, le=500, description="turns per summary")
    max_batches: int = Field(20, ge=1, le=1000, description="most summaries written in this run")
    ingest: bool = Field(True, description="also ingest queued turns into the graph layer, if loaded")


async def run_upkeep(memory: Memory, p: UpkeepParams) -> dict[str, Any]:
    from .llm import ChatClient

    cfg = memory.settings.upkeep
    target = cfg.target_unsummarized if p.target is None else p.target
    size = p.batch_size or cfg.batch_size
    if "summarize_messages" not in memory.catalog:
        raise Unavailable("upkeep needs the raw capture layer (plugin 'sqlite')")
    client = ChatClient(memory.settings.llm)  # raises Unavailable when none is configured
    written, covered = [], 0
    stats = await memory.call("summary_stats", {})
    while stats["unsummarized_count"] > target and len(written) < p.max_batches:
        excess = stats["unsummarized_count"] - target
        batch = await memory.call("summarize_messages", {"limit": max(2, min(size, excess))})
        if not batch["message_ids"]:
            break
        text = await asyncio.to_thread(client.complete, SYSTEM, batch["transcript"])
        stored = await memory.call("store_summary", {"summary_text": text, "message_ids": batch["message_ids"]})
        written.append(stored["id"])
        covered += stored["message_count"]
        stats = await memory.call("summary_stats", {})
    ingested = None
    if p.ingest and "ingest_batch_to_graphiti" in memory.catalog:
        try:
            ingested = await memory.call("ingest_batch_to_graphiti", {})
        except PPSError as exc:
            ingested = {"error": exc.message}
    return {"summaries_written": len(written), "summary_ids": written, "turns_covered": covered,
            "unsummarized_count": stats["unsummarized_count"], "target": target, "graph": ingested}


class UpkeepLoop:
    """Runs upkeep every ``interval_s`` in a serving process; failures are logged, never fatal."""

    def __init__(self, memory: Memory, interval_s: float) -> None:
        self.memory = memory
        self.interval_s = interval_s
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None and self.memory.settings.llm.configured:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="pps-upkeep")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                result = await run_upkeep(self.memory, UpkeepParams())
                if result["summaries_written"]:
                    log.info("upkeep wrote %d summaries", result["summaries_written"])
            except Exception as exc:  # keep serving; say why
                log.warning("upkeep failed: %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

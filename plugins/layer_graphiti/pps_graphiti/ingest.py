"""Ingestion: turns captured by the raw layer become graph episodes through the configured LLM.

The queue is the raw layer's per-turn ingestion state (``pending_ingestion`` / ``mark_ingested``
/ ``count_uningested``); a turn leaves it only after graphiti has stored its episode. Capture
never waits on any of this.

Each batch runs under ``memory.claim("graph-ingest")``: when several servers serve one entity (a turn store on
PostgreSQL), one of them at a time ingests, and the turns it marks ingested in the shared store are skipped by the
next holder, so each turn becomes one episode and costs one extraction. Elsewhere the round is skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from pps_llm.settings import llm_settings

from pps_core import IngestionQueue
from pps_core.errors import Unavailable
from pps_core.timeutil import from_storage, now_utc, to_storage

from .settings import NO_LLM

if TYPE_CHECKING:  # pragma: no cover
    from .layer import GraphitiLayer

log = logging.getLogger("pps.graphiti")

#: The job claimed around each ingestion batch (:meth:`pps_core.Memory.claim`).
CLAIM = "graph-ingest"

#: What a batch answers when another process of the entity holds the claim.
ELSEWHERE = ("another server of this entity is ingesting into the graph now (it holds the graph-ingest claim); "
             "it takes the queued turns, so nothing was ingested here")


def uningested_status(n: int, llm_configured: bool = True) -> str:
    """The note beside the count of turns not yet in the graph (thresholds of the original's startup health);
    without an LLM nobody can ingest, so it says that instead of recommending it."""
    if not llm_configured:
        return "(graph ingestion is off: no [llm] configured)" if n else "(healthy)"
    if n < 20:
        return "(healthy)"
    if n < 100:
        return "(batch ingestion recommended)"
    return "(HIGH - ingest soon!)"


async def _value(v):
    return await v if asyncio.iscoroutine(v) else v


class Ingestor:
    def __init__(self, layer: GraphitiLayer) -> None:
        self.layer = layer
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.ingested = 0
        self.last_error: str | None = None
        self.last_run: str | None = None

    @property
    def memory(self):
        return self.layer.memory

    def raw(self) -> IngestionQueue:
        queues = self.memory.find(IngestionQueue)
        if not queues:
            raise Unavailable("graph ingestion needs a layer that queues turns (the 'sqlite' plugin has one)")
        return queues[0]

    def require_llm(self) -> None:
        if not llm_settings(self.memory.settings).configured:
            raise Unavailable(NO_LLM)

    async def stats(self) -> dict[str, Any]:
        n = int(await _value(self.raw().count_uningested()))
        llm = llm_settings(self.memory.settings).configured
        return {"uningested": n, "status": uningested_status(n, llm), "llm_configured": llm,
                "worker_running": self._task is not None and not self._task.done(),
                "ingested_this_process": self.ingested, "last_run": self.last_run, "last_error": self.last_error,
                "graph": await self.layer.require().counts()}

    async def add_episode(self, name: str, body: str, description: str, when, source) -> Any:
        self.require_llm()
        graph = self.layer.require()
        async with self.layer.write_lock:  # a backup pauses writes with this lock
            result = await graph.graphiti.add_episode(name=name, episode_body=body, source_description=description,
                                                      reference_time=when, source=source,
                                                      group_id=self.layer.group_id)
            self.layer.changed()
        return result

    async def ingest_batch(self, batch_size: int) -> dict[str, Any]:
        """One batch under ``memory.claim("graph-ingest")``; while another server holds it, nothing is ingested
        here and the answer's ``note`` says so."""
        self.require_llm()
        raw = self.raw()
        started = time.perf_counter()
        async with self._lock, self.memory.claim(CLAIM) as mine:
            if not mine:
                remaining = int(await _value(raw.count_uningested()))
                return {"ingested": 0, "turn_ids": [], "facts_extracted": 0, "remaining": remaining,
                        "status": uningested_status(remaining), "error": None, "note": ELSEWHERE,
                        "ms": round((time.perf_counter() - started) * 1000, 1)}
            done, facts = await self._batch(raw, batch_size)
        remaining = int(await _value(raw.count_uningested()))
        return {"ingested": len(done), "turn_ids": done, "facts_extracted": facts, "remaining": remaining,
                "status": uningested_status(remaining), "error": self.last_error if not done else None,
                "ms": round((time.perf_counter() - started) * 1000, 1)}

    async def _batch(self, raw: IngestionQueue, batch_size: int) -> tuple[list[int], int]:
        """One batch, under the lock and the claim: (the turns ingested, the facts extracted)."""
        from graphiti_core.nodes import EpisodeType

        done: list[int] = []
        facts = 0
        for msg in await _value(raw.pending_ingestion(batch_size)):
            try:
                result = await self.add_episode(
                    f"turn {msg.id}", f"{msg.author_name}: {msg.content}", f"{msg.channel} turn",
                    from_storage(msg.created_at), EpisodeType.message)
            except Unavailable:
                raise
            except Exception as exc:
                self.last_error = f"turn {msg.id}: {type(exc).__name__}: {exc}"
                log.warning("graph ingestion stopped at %s", self.last_error)
                if not done:
                    raise Unavailable(f"ingest_batch_to_graphiti: the LLM call failed ({self.last_error}); "
                                      "nothing left the queue") from None
                break
            await _value(raw.mark_ingested([msg.id]))
            done.append(msg.id)
            facts += len(result.edges)
        self.ingested += len(done)
        self.last_run = to_storage(now_utc())
        if len(done):
            self.last_error = None
        return done, facts

    # -- background worker ------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None and llm_settings(self.memory.settings).configured and self.layer.settings.background_ingest:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="pps-graphiti-ingest")

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        interval = self.layer.settings.ingest_interval_s
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), interval)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                if int(await _value(self.raw().count_uningested())) > 0:
                    await self.ingest_batch(self.layer.settings.ingest_batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep the worker alive; the queue keeps the turns
                self.last_error = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(interval)

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

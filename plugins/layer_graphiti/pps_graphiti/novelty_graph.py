"""Novelty counts kept in the graph server itself (FalkorDB, Neo4j): a graph-server entity keeps nothing in its
home, so it needs no owner lock and any number of processes serve it with one set of counts.

Each count is a ``PPSSurfaced`` node (group_id, layer, source, count, last). Reads never wait on the server: the
counts are held in memory, like the SQLite store's. A task of this process writes what it surfaced every
``flush_s`` (one statement per batch, merged on the server: decay to the newer moment, plus this process's new
moments, minus one if another process already counted that moment) and reads every count back, so each server
sees what the others surfaced within a few seconds. The last batch is written when the layer closes.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

from .rankers import DAY_S, Novelty

log = logging.getLogger("pps.graphiti")

MERGE = (
    "UNWIND $rows AS r "
    "MERGE (s:PPSSurfaced {group_id: $group_id, layer: r.layer, source: r.source}) "
    "WITH s, r, coalesce(s.count, 0.0) AS c, coalesce(s.last, 0.0) AS last "
    "WITH s, r, c, last, CASE WHEN c > 0 AND r.first - last < $settle THEN r.n - 1 ELSE r.n END AS n "
    "SET s.count = c * exp(-$ln2 * (CASE WHEN r.last > last THEN r.last - last ELSE 0.0 END) / $decay) + n, "
    "s.last = CASE WHEN r.last > last THEN r.last ELSE last END")
LOAD = ("MATCH (s:PPSSurfaced) WHERE s.group_id = $group_id "
        "RETURN s.layer AS layer, s.source AS source, s.count AS count, s.last AS last")
DELETE = ("UNWIND $rows AS r MATCH (s:PPSSurfaced {group_id: $group_id, layer: r.layer, source: r.source}) "
          "DELETE s")


class GraphNovelty(Novelty):
    """:class:`Novelty` with its counts in the graph. ``graph()`` gives the layer's open graph (or None)."""

    def __init__(self, graph: Callable[[], Any], group_id: str, half_count: float = 5.0, decay_days: float = 7.0,
                 settle_s: float = 60.0, flush_s: float = 5.0, **kw: Any) -> None:
        super().__init__(None, half_count, decay_days, settle_s, flush_s, **kw)  # type: ignore[arg-type]
        self.graph = graph
        self.group_id = group_id
        self._counts = {}
        #: (layer, source) -> [first moment, last moment, moments] surfaced here since the last write.
        self._pending: dict[tuple[str, str], list[float]] = {}
        self._gone: set[tuple[str, str]] = set()
        self._task: asyncio.Task | None = None
        self._io = asyncio.Lock()

    def _load(self) -> dict[tuple[str, str], tuple[float, float]]:
        assert self._counts is not None
        return self._counts

    def record(self, shown, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        counts = self._load()
        for r in shown:
            key = (r.layer, r.source)
            c, last = counts.get(key, (0.0, 0.0))
            if c and now - last < self.settle_s:
                continue
            counts[key] = (self._decayed(c, last, now) + 1.0, now)
            p = self._pending.setdefault(key, [now, now, 0.0])
            p[1] = now
            p[2] += 1.0

    def flush(self) -> None:
        """Writes are the task's (:meth:`sync`); nothing is written from a read."""

    def forget(self, layer: str, source: str) -> None:
        key = (layer, source)
        self._load().pop(key, None)
        self._pending.pop(key, None)
        self._gone.add(key)

    async def sync(self) -> None:
        """Write this process's surfacings and deletions, then read every count back."""
        graph = self.graph()
        if graph is None:
            return
        async with self._io:
            pending, self._pending = self._pending, {}
            gone, self._gone = self._gone, set()
            try:
                if gone:
                    await graph.query(DELETE, group_id=self.group_id,
                                      rows=[{"layer": la, "source": s} for la, s in gone])
                if pending:
                    await graph.query(MERGE, group_id=self.group_id, settle=float(self.settle_s), ln2=math.log(2),
                                      decay=self.decay_days * DAY_S,
                                      rows=[{"layer": la, "source": s, "first": p[0], "last": p[1], "n": p[2]}
                                            for (la, s), p in pending.items()])
            except BaseException:
                for key, p in pending.items():  # kept for the next round
                    q = self._pending.setdefault(key, p)
                    if q is not p:
                        q[0], q[2] = min(q[0], p[0]), q[2] + p[2]
                self._gone |= gone - set(self._pending)
                raise
            await self.refresh(locked=True)

    async def refresh(self, locked: bool = False) -> None:
        """Every count of this entity, read from the graph (what this process surfaced since stays counted)."""
        graph = self.graph()
        if graph is None:
            return
        if not locked:
            async with self._io:
                return await self.refresh(locked=True)
        rows = await graph.query(LOAD, group_id=self.group_id)
        counts = {(r["layer"], r["source"]): (float(r["count"]), float(r["last"])) for r in rows}
        for key, (first, last, n) in self._pending.items():
            c, at = counts.get(key, (0.0, 0.0))
            if c and first - at < self.settle_s:
                n -= 1
            counts[key] = (self._decayed(c, at, last) + n, max(at, last))
        for key in self._gone:
            counts.pop(key, None)
        self._counts = counts

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="pps-graphiti-novelty")

    async def _run(self) -> None:
        first = True
        while True:
            try:
                await (self.refresh() if first else self.sync())
                first = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a graph server that is down: counts stay in memory until it is back
                log.debug("novelty counts not synced with the graph: %s", exc)
            await asyncio.sleep(self.flush_s)

    async def stop(self) -> None:
        """Stop the task and write the last batch (the layer calls this before it closes the graph)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        try:
            await self.sync()
        except Exception as exc:
            log.warning("novelty counts of this process were not written to the graph: %s", exc)

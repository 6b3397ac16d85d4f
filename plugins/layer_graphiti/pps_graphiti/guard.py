"""Writes to the embedded graph that a full disk cannot turn into lost facts.

Kuzu answers a short write to its WAL with an "IO exception", and the database object is not to be
trusted afterwards: later writes were acknowledged, then lost, and closing it (which checkpoints)
aborts the process ("terminate called after throwing kuzu::common::IOException", or a heap error).
So every write path takes ``layer.write_lock`` (a :class:`WriteGuard`): before a write, too little
free space is a 503 and Kuzu is not asked at all (the usual case: a disk fills gradually); a storage
failure inside a write is a 503 and marks the graph failed, and from then on writes are refused (503)
until the server restarts and Kuzu replays its WAL, which holds every acknowledged write. The failed
database is never closed in this process.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pps_core.errors import PPSError, Unavailable, storage_error

if TYPE_CHECKING:  # pragma: no cover
    from .layer import GraphitiLayer

log = logging.getLogger("pps.graphiti")

#: What Kuzu says when its files cannot be written (its messages carry no errno).
KUZU_STORAGE = ("IO exception", "Buffer manager exception", "Cannot write to file", "No space left")


class GraphFailed(Unavailable):
    """The graph could not store a write (disk full, I/O error): nothing of it was acknowledged."""

    code = "storage_unavailable"


def storage_failure(exc: BaseException) -> str | None:
    """A one-line reason if ``exc`` says the graph's files could not be written, else None."""
    if isinstance(exc, PPSError):
        return None
    text = str(exc)
    if storage_error(exc) is not None or any(m in text for m in KUZU_STORAGE):
        return text.split(". path:")[0][:300]
    return None


def free_bytes(folder: Path) -> int | None:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


class WriteGuard:
    """``async with layer.write_lock:`` one writer at a time (a backup pauses writes with it), and no write
    into a graph that failed one or on a disk about to be full."""

    def __init__(self, layer: GraphitiLayer) -> None:
        self.layer = layer
        self._lock = asyncio.Lock()

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> WriteGuard:
        await self._lock.acquire()
        try:
            await self.layer.ready_to_write()
        except BaseException:
            self._lock.release()
            raise
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc is None and self.layer.settings.embedded:
                from .engine_client import owner_only

                owner_only((Path(self.layer.memory.home) / self.layer.settings.db_file).resolve())
            why = storage_failure(exc) if exc is not None else None
            if why:
                self.layer.fault = why
                log.warning("graph write failed (%s): writes are refused until the server restarts", why)
                raise GraphFailed(f"rich_texture: the graph could not store this ({why}); free space, then "
                                  "retry: nothing of it was stored") from exc
        finally:
            self._lock.release()
        return False


async def ready_to_write(layer: GraphitiLayer) -> None:
    """Refuse (503) a write into a graph that failed one, or while the disk is nearly full."""
    if layer.fault:
        raise GraphFailed(f"rich_texture: a write failed in the graph store ({layer.fault}); writes are refused "
                          "until the server restarts (every acknowledged fact is kept): free space, then restart")
    if not layer.settings.embedded:
        return
    folder = (Path(layer.memory.home) / layer.settings.db_file).resolve().parent
    free = free_bytes(folder)
    need = layer.settings.min_free_mb * 1024 * 1024
    if free is not None and free < need:
        raise GraphFailed(f"rich_texture: only {free // 1024} KB free on the graph's disk ({folder}); writes need "
                          f"[graphiti] min_free_mb = {layer.settings.min_free_mb}: free space, then retry "
                          "(nothing was stored)")


#: Graphs that failed a write: kept referenced until the process ends, so no destructor checkpoints them.
FAILED: list = []


def keep_failed(graph: object) -> None:
    """Keep a graph that failed a write alive past the interpreter's shutdown: its database's destructor would
    checkpoint, and Kuzu aborts the process there (``free(): invalid next size``). The list alone is not enough:
    shutdown clears module globals, which ran the destructor. One reference the interpreter never releases is."""
    import ctypes

    FAILED.append(graph)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(graph))


async def drop_orphans(layer: GraphitiLayer) -> int:
    """Delete entity nodes with no fact and no episode mentioning them: what a crash between saving a
    triplet's entities and its fact leaves behind (a fact is never half-saved; its entities can be)."""
    graph = layer.require()
    rows = await graph.query(
        f"MATCH (n:Entity) WHERE n.group_id = $group_id AND NOT EXISTS {{ MATCH (n){graph.hop}(:Entity) }} "
        "AND NOT EXISTS { MATCH (:Episodic)-[:MENTIONS]->(n) } RETURN n.uuid AS uuid", group_id=layer.group_id)
    if rows:
        await graph.query("MATCH (n:Entity) WHERE n.uuid IN $uuids DETACH DELETE n", uuids=[r["uuid"] for r in rows])
        log.info("removed %d entities without facts (left by an interrupted write)", len(rows))
    return len(rows)

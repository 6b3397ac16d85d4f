"""Compacting the embedded graph in place, so deleted values leave the disk.

Kuzu keeps deleted values in its pages (a forgotten turn's episode, facts and the entity summaries that
quoted them were still in ``graph.kuzu`` after a clean stop, 20-28 copies per canary). After a forget the
live database is exported and imported into a fresh file beside it (the same compacted copy a backup takes),
then swapped in:

1. ``<graph>.compact-pending`` marks that deleted text may still be in the file (written before the
   deletions; a crash before the swap leaves it, and the next open compacts);
2. ``EXPORT DATABASE`` into ``<graph>.compact-export/``, imported into ``<graph>.compact`` (writes are paused
   by the caller's write lock; reads go on);
3. queries are held at the gate (:class:`~pps_graphiti.engine_client.QueryGate`), the live database closed (its WAL
   checkpointed and removed), the fresh file fsynced and renamed over the old one (``os.replace``: atomic),
   the folder fsynced, the database opened again, queries let through.

A crash before the rename leaves the old database whole (and the leftovers are removed at the next open); a
crash after it leaves the new one whole. If the live WAL is still there after the close (it never should
be), the swap is abandoned and the old file opened again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pps_core.errors import Unavailable

if TYPE_CHECKING:  # pragma: no cover
    from .layer import GraphitiLayer

log = logging.getLogger("pps.graphiti")
T = TypeVar("T")

PENDING = ".compact-pending"
FRESH = ".compact"
EXPORT = ".compact-export"


def db_path(layer: GraphitiLayer) -> Path:
    return (Path(layer.memory.home) / layer.settings.db_file).resolve()


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def clean_leftovers(path: Path) -> None:
    """What a compaction cut short left beside the graph (never the graph itself): removed before it opens."""
    for suffix in (FRESH, f"{FRESH}.wal", f"{FRESH}.tmp", EXPORT):
        p = _sibling(path, suffix)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()


def mark_pending(layer: GraphitiLayer) -> None:
    """Before deleting text from the embedded graph: the next open compacts if this process does not."""
    if not layer.settings.embedded:
        return
    path = _sibling(db_path(layer), PENDING)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(path.parent)


def pending(layer: GraphitiLayer) -> bool:
    return layer.settings.embedded and _sibling(db_path(layer), PENDING).exists()


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def schedule(layer: GraphitiLayer) -> None:
    """Compact ``compact_delay_s`` after the last of a run of deletes (a compaction takes seconds on a large
    graph: ~3 s at 2,000 facts, see bench/graph_forget.py), and at close if it has not run; the pending mark
    has the next open do it after a crash."""
    task = getattr(layer, "_compact_task", None)
    if task is not None and not task.done():
        task.cancel()

    async def later() -> None:
        await asyncio.sleep(layer.settings.compact_delay_s)
        task.started = True  # type: ignore[attr-defined]  # from here on it is awaited, never cancelled
        try:
            await compact(layer)
        except Exception as exc:  # the mark stays: the next delete, close or open tries again
            log.warning("deferred graph compaction failed: %s", exc)

    task = asyncio.get_running_loop().create_task(later(), name="pps-graphiti-compact")
    task.started = False  # type: ignore[attr-defined]
    layer._compact_task = task


async def at_close(layer: GraphitiLayer) -> None:
    """At close, a compaction still waiting runs now (nothing deleted stays on the disk past a clean stop);
    one under way is waited for."""
    task = getattr(layer, "_compact_task", None)
    layer._compact_task = None
    if task is not None and not task.done():
        if not getattr(task, "started", False):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    if pending(layer) and layer.graph is not None and not layer.fault:
        try:
            await compact(layer)
        except Exception as exc:
            log.warning("graph compaction at close failed (the next open tries again): %s", exc)


async def compact(layer: GraphitiLayer) -> dict[str, float] | None:
    """Compact now, taking the write lock (opening with a pending mark; ``pps`` maintenance)."""
    async with layer.write_lock:
        return await compact_locked(layer)


async def compact_locked(layer: GraphitiLayer) -> dict[str, float] | None:
    """Compact the embedded graph (the caller holds ``layer.write_lock``). None for a graph on a server (it
    reclaims deleted values itself). A failure before the swap leaves the live database as it was (and the
    pending mark, so the next forget or open tries again) and is a 503 naming the cause."""
    from .layer import _cypher_path, _import_db

    if not layer.settings.embedded or layer.graph is None:
        return None
    graph = layer.graph
    path = db_path(layer)
    fresh, export = _sibling(path, FRESH), _sibling(path, EXPORT)
    started = time.perf_counter()
    mark_pending(layer)
    clean_leftovers(path)
    try:
        await _uncancelled(reopen(layer))
        await _uncancelled(graph.query(f"EXPORT DATABASE '{_cypher_path(export)}'"))
        await _uncancelled(_import_db(layer, export, fresh))
        await _uncancelled(asyncio.to_thread(_fsync_file, fresh))
    except BaseException as exc:
        await asyncio.to_thread(clean_leftovers, path)
        if not isinstance(exc, Exception):
            raise
        log.warning("graph compaction failed before the swap (the graph is unchanged): %s", exc)
        raise Unavailable(f"rich_texture: compacting the graph failed ({type(exc).__name__}: {exc}); deleted "
                          "text may stay in its file until the next forget or restart compacts it") from None
    finally:
        await asyncio.to_thread(shutil.rmtree, export, True)
    built = time.perf_counter()
    await _swap(layer, path, fresh)
    os.unlink(_sibling(path, PENDING))
    _fsync_dir(path.parent)
    done = time.perf_counter()
    stats = {"export_import_ms": round((built - started) * 1000, 1), "swap_ms": round((done - built) * 1000, 1),
             "bytes": float(path.stat().st_size)}
    log.info("graph compacted: %s", stats)
    return stats


async def _uncancelled(work: Awaitable[T]) -> T:
    """``work`` (a thread of Kuzu's or ours) runs to its end even if the caller is cancelled (a server
    stopping): the cancellation is raised after it, so nothing is removed under a thread still writing it."""
    fut = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await fut
        raise


async def reopen(layer: GraphitiLayer) -> None:
    """Close the live database (which checkpoints it) and open it again, with every query held at the gate.

    Kuzu 0.11 crashes the process (SIGSEGV) reading or exporting a database in which an explicit ``CHECKPOINT``
    followed the deletion of a relationship since it was opened (a fact deleted, then a backup: it
    checkpointed, then exported); a database opened afresh reads and exports the same data safely. So nothing
    runs ``CHECKPOINT`` on the live graph: where the WAL must be folded into the file, it is reopened."""
    await _swap(layer, db_path(layer), None)


async def _swap(layer: GraphitiLayer, path: Path, fresh: Path | None) -> None:
    """Close the live database, rename the fresh one (if any) over it, open it: with every query held at the
    gate. The database lives in the engine process (``pps_graphiti.engine``): closing it ends that process, and
    opening starts a fresh one (which also gives back whatever memory the engine had grown)."""
    from .engine_client import owner_only

    handle = layer.require().kuzu  # our handle: graphiti's driver, if built, reaches the engine through it
    assert handle is not None
    gate = handle.pps_gate
    async with gate.closed():  # no query under way: the engine can close
        await asyncio.to_thread(handle.engine.close)
        wal = Path(f"{path}.wal")
        swapped = fresh is None
        try:
            if fresh is None:
                pass
            elif wal.exists() and wal.stat().st_size > 0:  # the close did not checkpoint: keep the old file
                log.warning("graph compaction abandoned: %s is not empty after the close", wal)
            else:
                wal.unlink(missing_ok=True)
                os.replace(fresh, path)
                _fsync_dir(path.parent)
                swapped = True
        finally:
            if not swapped:
                clean_leftovers(path)
            handle.pps_replayed = await asyncio.to_thread(handle.engine.start)
            owner_only(path)
        if not swapped:
            raise Unavailable("rich_texture: compacting the graph was abandoned (its WAL was not empty after "
                              "closing); the graph is unchanged and is compacted at the next restart")

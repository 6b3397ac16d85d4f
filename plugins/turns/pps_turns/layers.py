"""The raw_capture and message_summaries layers: views of one :class:`~pps_turns.service.TurnDomain` (its store,
its searches) for the kernel's recall, startup package and health."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pps_core import (
    Layer,
    LayerHealth,
    Message,
    Pointer,
    SearchResult,
    SectionConfig,
    StartupItems,
    SummaryBatch,
    SummaryReceipt,
    TurnItem,
)

from . import retrieval
from .store import ArchivableTurnStore, GlanceableStore

if TYPE_CHECKING:  # pragma: no cover
    from .service import TurnDomain

UNREAD_PREVIEW = 10
#: The largest page a navigation operation returns: a "left out" pointer asks for at most one page.
PAGE_LIMIT = 1000


def unsummarized_status(n: int, summarizer: bool = True) -> str:
    """The note beside the unsummarized count in the startup health line (the original's thresholds): the
    pressure to summarize grows with the backlog the startup package shows in full. ``summarizer``: a chat model
    is configured (``[llm]``); without one nothing is "available" to summarize with (issue 39), so the note says
    only that there is enough to summarize."""
    if n < 50:
        return "(healthy)"
    if n < 100:
        return "(healthy, summarization available)" if summarizer else "(healthy, enough to summarize)"
    if n < 200:
        return "(summarization recommended)"
    return "(HIGH - summarize soon!)"


def turn_metadata(t: dict[str, Any]) -> dict[str, Any]:
    """A turn item's ``metadata``, for callers: derived fields at the top, the caller's own metadata under
    "metadata"."""
    return {"kind": "turn", "author_name": t["author_name"], "channel": t["channel"],
            "session_id": t.get("session_id"), "message_id": t.get("message_id"), "summary_id": t.get("summary_id"),
            "metadata": t.get("metadata") or {}}


def turn_result(t: dict[str, Any], layer: str = "raw_capture", score: float = 0.0) -> SearchResult:
    """A turn as an item: rendered by the kernel from kind/channels/author (the typed rendering contract)."""
    return SearchResult(layer=layer, content=t["content"], source=str(t["id"]), score=score,
                        timestamp=t["created_at"], metadata=turn_metadata(t), kind="turn", channels=[t["channel"]],
                        author=t["author_name"])


def turn_item(t: dict[str, Any], layer: str = "raw_capture") -> TurnItem:
    """The same item as :func:`turn_result` (``to_result()`` gives it back), without validating a model: the startup
    package takes every unsummarized turn this way (pps_core.TurnItem). ``t`` is a row of the layer's own store."""
    return TurnItem(layer=layer, content=t["content"], source=str(t["id"]), timestamp=t["created_at"],
                    channel=t["channel"], author=t["author_name"], metadata=turn_metadata(t))


def summary_result(s: dict[str, Any], score: float = 0.0) -> SearchResult:
    return SearchResult(layer="message_summaries", content=s["summary_text"], source=f"summary {s['id']}",
                        score=score, timestamp=s["time_span_end"] or s["created_at"],
                        metadata={"kind": "summary", "channels": s["channels"], "start_id": s["start_id"],
                                  "end_id": s["end_id"], "message_count": s["message_count"]},
                        kind="summary", channels=list(s["channels"]))


class RawCaptureLayer(Layer):
    """Every turn, verbatim, append-only; ``summary_id`` NULL until summarized. Any :class:`TurnStore` backs it."""

    name = "raw_capture"
    title = "Raw capture"
    #: The default floor of the calibrated score (the probability that a turn is relevant, pps_turns.retrieval):
    #: ambient recall and raw_search return nothing under it. ``[recall] min_score`` sets it per layer.
    min_recall_score = retrieval.FLOOR

    def default_sections(self) -> list[SectionConfig]:
        """reference/002: ALL unsummarized turns, last (the pressure to summarize is intended)."""
        return [SectionConfig(name="Recent turns", layer=self.name, style="turns", max_chars=1000, position=40)]

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        if section.quotas:  # the shown turns are not one contiguous page: page through all of them
            return Pointer(operation="get_turns_since_summary", params={"offset": 0, "limit": min(total, PAGE_LIMIT)})
        return Pointer(operation="get_turns_since_summary",
                       params={"offset": shown, "limit": min(max(total - shown, 1), PAGE_LIMIT)})

    def __init__(self, domain: TurnDomain) -> None:
        super().__init__()
        self.domain = domain
        self.memory = domain.memory
        #: The :class:`~pps_turns.store.TurnStore` (SQLite, PostgreSQL, ...).
        self.backend = domain.store
        #: The fused turn search (:class:`~pps_turns.retriever.Retriever`).
        self.retriever = domain.retriever
        self.exclusive = bool(getattr(domain.store, "exclusive", True))
        self.derived_paths = tuple(getattr(domain.store, "derived_paths", ()))  # e.g. a turn-vector index file
        #: A store readable beside its owner (:class:`~pps_turns.store.GlanceableStore`) opens at a glance.
        self.glance = isinstance(domain.store, GlanceableStore)
        self.opened = False

    async def open(self) -> None:
        await self.backend.open()
        self.opened = True

    async def open_glance(self) -> None:
        """Read-only beside the owner, searched by words (a glance loads no embedder)."""
        await self.backend.open_glance()
        self.opened = True

    async def close(self) -> None:
        self.opened = False
        await self.retriever.close()
        await self.backend.close()

    @asynccontextmanager
    async def claim_job(self, job: str) -> AsyncIterator[bool]:
        """:class:`pps_core.contracts.JobClaims` (``memory.claim``) through the store's ``claim_job`` where
        several servers share it; a store one process owns leaves every job to that process."""
        claim = getattr(self.backend, "claim_job", None)
        if claim is None:
            yield True
            return
        async with claim(job) as mine:
            yield mine

    async def shared_get(self, key: str) -> str | None:
        """:class:`pps_core.contracts.SharedValues` through the store where several servers share it (None, and
        nothing kept, for a store one process owns: its home is the only one)."""
        get = getattr(self.backend, "shared_get", None)
        return await get(key) if get is not None else None

    async def shared_put(self, key: str, value: str) -> None:
        put = getattr(self.backend, "shared_put", None)
        if put is not None:
            await put(key, value)

    async def shared_prune(self, prefix: str, older_than_s: float) -> int:
        """:class:`pps_core.contracts.PrunableSharedValues` through the store (0 where it keeps no shared values)."""
        prune = getattr(self.backend, "shared_prune", None)
        return await prune(prefix, older_than_s) if prune is not None else 0

    async def ready(self) -> str | None:
        """The store's own readiness (a database server answering), when it has one (``ready()``)."""
        check = getattr(self.backend, "ready", None)
        return await check() if check is not None else None

    async def reindex(self, progress, full: bool = False) -> dict[str, Any] | None:
        """Turn vectors: those missing, e.g. turns stored before an embedder was loaded (every one with ``full``)."""
        return await self.retriever.reindex(progress, full)

    async def snapshot(self, dest: Path) -> list[str] | None:
        """``pps backup`` of a store that is not files in the home (:class:`~pps_turns.store.ArchivableTurnStore`,
        e.g. PostgreSQL): its rows, written under ``dest``; both turn layers' data (one store)."""
        if not isinstance(self.backend, ArchivableTurnStore):
            return None  # files in the home (SQLite): copied as they are
        return await self.backend.export_rows(Path(dest))

    async def snapshot_counts(self, dest: Path) -> dict[str, int] | None:
        """The counts the archive holds, taken in the export's snapshot (a fleet's other servers write meanwhile)."""
        c = self.backend.exported_counts(Path(dest)) if isinstance(self.backend, ArchivableTurnStore) else None
        return None if c is None else {"messages": c["total"], "unsummarized": c["unsummarized"],
                                       "uningested": c["uningested"], "cursors": c["cursors"]}

    async def after_restore(self, manifest: dict[str, Any]) -> None:
        """``pps restore``: the archive's rows go back into the (empty) store, checked table by table."""
        if isinstance(self.backend, ArchivableTurnStore):
            await self.backend.import_rows(Path(self.memory.home))

    async def search(self, query: str, limit: int, offset: int = 0, channel: str | None = None,
                     min_score: float | None = None) -> list[SearchResult]:
        """Fused search of every turn, scored by the calibrated probability that a turn is relevant; ``channel``:
        only that channel's turns; ``min_score``: only turns scoring at least this (None: no floor here; recall
        applies :attr:`min_recall_score`)."""
        found = await self.retriever.search(query, limit, offset, channel, min_score=min_score)  # retrieval.py
        results = [turn_result(t, score=t["score"]) for t in found]
        for r, t in zip(results, found, strict=True):
            r.signals = t["signals"]  # the signals that made the score: bm25, dense, coverage, ... (explain)
        return results

    async def recent(self, limit: int) -> list[SearchResult]:
        return [turn_result(t) for t in await self.backend.newest(limit)]

    async def startup(self, count: int | None) -> StartupItems:
        """ALL unsummarized turns (or the newest ``count``), chronological, with the total."""
        total, found = await self.backend.unsummarized_page(count)
        return StartupItems(items=[turn_item(t, self.name) for t in found], total=total)

    def backlog_text(self, key: str, count: int) -> str | None:
        if key == "unsummarized":  # shown at zero too: "0 unsummarized messages (healthy)"
            return f"{count} unsummarized messages {unsummarized_status(count, self._summarizer())}"
        return super().backlog_text(key, count)

    def _summarizer(self) -> bool:
        """Whether the entity has a chat model to summarize with (``[llm]`` configured)."""
        try:
            return self.domain.memory.chat_model() is not None
        except Exception:  # noqa: BLE001 - a model that cannot be made is no summarizer
            return False

    async def health(self) -> LayerHealth:
        started = time.perf_counter()
        c = await self.backend.counts()
        return LayerHealth(layer=self.name, available=True, detail=self.backend.detail,
                           counts={"messages": c["total"], "unsummarized": c["unsummarized"],
                                   "uningested": c["uningested"], "cursors": c.get("cursors", 0)},
                           backlog={"unsummarized": c["unsummarized"]},
                           latency_ms=self.recent_latency_ms or round((time.perf_counter() - started) * 1000, 2))

    # -- what other plugins use ---------------------------------------------------------------

    async def store(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Store prepared turns (see :meth:`TurnDomain.capture`); the acks."""
        return await self.domain.capture(batch)

    async def pending_ingestion(self, limit: int) -> list[Message]:
        return [Message(**t) for t in await self.backend.pending_ingestion(limit)]

    async def mark_ingested(self, ids: list[int]) -> int:
        return await self.backend.mark_ingested(list(ids))

    async def count_uningested(self) -> int:
        return (await self.backend.counts())["uningested"]

    async def owed_forgets(self) -> list[dict[str, Any]]:
        """:class:`pps_core.contracts.OwedForgets`: what forgets still owe."""
        return await self.domain.owed_forgets()

    async def settle_owed_forgets(self) -> dict[str, Any]:
        """:class:`pps_core.contracts.OwedForgets`: retry what forgets still owe."""
        return await self.domain.settle_owed_forgets()

    async def unread_for_recall(self, consumer_key: str, channel: str | None) -> StartupItems | None:
        found = await self.backend.poll(consumer_key, channel, UNREAD_PREVIEW, newest_first_preview=True)
        if not found["turns"]:
            return None
        items = [turn_result(t) for t in found["turns"]]
        older = None
        if found["oldest_unread_at"]:  # the preview marked everything read: point at all of it by time
            older = Pointer(operation="get_turns_since", params={
                "timestamp": found["oldest_unread_at"], "limit": min(PAGE_LIMIT, found["unread_total"] * 4)})
        more = Pointer(operation="get_turns_since",  # a budget may still cut the preview: point at it by time
                       params={"timestamp": items[0].timestamp, "limit": min(PAGE_LIMIT, 4 * len(items))})
        return StartupItems(items=items, total=found["unread_total"], more=more, older=older)

    # -- what upkeep uses (pps_core.contracts.SummarizableStore) ------------------------------

    async def unsummarized_count(self) -> int:
        return (await self.backend.counts())["unsummarized"]

    async def next_to_summarize(self, limit: int) -> SummaryBatch:
        batch = await self.domain.summarize_batch(limit)
        return SummaryBatch(ids=batch["message_ids"], transcript=batch["transcript"],
                            unsummarized=batch["unsummarized_count"])

    async def save_summary(self, text: str, ids: list[int]) -> SummaryReceipt:
        async with self.memory.writing():  # a write like store_summary: a backup waits for it
            stored = await self.domain.save_summary(text, message_ids=ids)
        return SummaryReceipt(id=stored["id"], message_count=stored["message_count"])


class SummariesLayer(Layer):
    """Summaries of turns: FTS5, newest first at startup."""

    name = "message_summaries"
    title = "Summaries"
    #: The default floor of a summary's calibrated score (``[recall] min_score`` sets it).
    min_recall_score = retrieval.SUMMARY_FLOOR

    def default_sections(self) -> list[SectionConfig]:
        """reference/002: the two newest summaries, newest first, each cut to 500 characters."""
        return [SectionConfig(name="Summaries", layer=self.name, style="summaries", count=2, max_chars=500,
                              order="newest_first", position=30)]

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        return Pointer(operation="get_recent_summaries", params={"limit": total})

    def __init__(self, domain: TurnDomain) -> None:
        super().__init__()
        self.domain = domain
        self.memory = domain.memory
        self.backend = domain.store
        self.exclusive = bool(getattr(domain.store, "exclusive", True))
        self.glance = isinstance(domain.store, GlanceableStore)

    async def open_glance(self) -> None:
        """Nothing of its own: the store is opened (read-only) by ``raw_capture``'s glance, before this one."""
        if not self.domain.raw.opened:  # that glance did not open it: this one warms up too
            raise RuntimeError("the turn store did not open at a glance")

    async def reindex(self, progress, full: bool = False) -> dict[str, Any] | None:
        """Summary vectors: those missing (every one with ``full``)."""
        return await self.domain.summary_search.reindex(progress, full)

    async def search(self, query: str, limit: int, offset: int = 0,
                     min_score: float | None = None) -> list[SearchResult]:
        """Hybrid (BM25 + summary vectors) when an embedder is loaded, BM25 otherwise; scored by the calibrated
        probability of relevance; ``min_score``: only summaries scoring at least this."""
        found = await self.domain.summary_search.search(query, limit, offset, min_score=min_score)
        results = [summary_result(s, s["score"]) for s in found]
        for r, s in zip(results, found, strict=True):
            r.signals = s["signals"]
        return results

    async def recent(self, limit: int) -> list[SearchResult]:
        found = await self.backend.recent_summaries(limit)
        return [summary_result(s) for s in reversed(found)]

    async def startup(self, count: int | None) -> StartupItems:
        """The newest ``count`` summaries, and how many there are (counted, not read)."""
        items = await self.recent(count if count is not None else 1_000_000)
        full = count is not None and len(items) >= count
        return StartupItems(items=items, total=await self.backend.summary_count() if full else len(items))

    async def snapshot_counts(self, dest: Path) -> dict[str, int] | None:
        """The counts the archive holds (``raw_capture``'s snapshot exported the summaries too, in one snapshot)."""
        c = self.backend.exported_counts(Path(dest)) if isinstance(self.backend, ArchivableTurnStore) else None
        return None if c is None else {"summaries": c["summaries"], "needs_rewrite": c["needs_rewrite"]}

    async def health(self) -> LayerHealth:
        n = await self.backend.summary_count()
        rewrite = len(await self.backend.needs_rewrite())
        return LayerHealth(layer=self.name, available=True, detail=self.backend.detail,
                           counts={"summaries": n, "needs_rewrite": rewrite},
                           backlog={"summaries_to_rewrite": rewrite} if rewrite else {},
                           latency_ms=self.recent_latency_ms)

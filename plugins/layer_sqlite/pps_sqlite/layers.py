"""The raw_capture and message_summaries layers, sharing one database."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pps_core import Layer, LayerHealth, Message, SearchResult, StartupItems

from . import summaries, turns
from .db import Database, SQLiteSettings
from .summaryindex import SummaryIndex
from .turnindex import Retriever

UNREAD_PREVIEW = 10


def open_layers(memory) -> list[Layer]:
    settings = memory.settings.plugin_settings(SQLiteSettings, "sqlite")
    db = Database(Path(memory.home) / settings.file, settings.busy_timeout_ms)
    raw = RawCaptureLayer(memory, db)
    return [raw, SummariesLayer(memory, db, raw)]


def turn_result(t: dict[str, Any], layer: str = "raw_capture", score: float = 0.0) -> SearchResult:
    md = {"kind": "turn", "author_name": t["author_name"], "channel": t["channel"],
          "session_id": t.get("session_id"), "message_id": t.get("message_id"), "summary_id": t.get("summary_id")}
    md.update({f"turn_{k}": v for k, v in (t.get("metadata") or {}).items() if k not in md})
    return SearchResult(layer=layer, content=t["content"], source=str(t["id"]), score=score,
                        timestamp=t["created_at"], metadata=md)


def summary_result(s: dict[str, Any], score: float = 0.0) -> SearchResult:
    return SearchResult(layer="message_summaries", content=s["summary_text"], source=f"summary {s['id']}",
                        score=score, timestamp=s["time_span_end"] or s["created_at"],
                        metadata={"kind": "summary", "channels": s["channels"], "start_id": s["start_id"],
                                  "end_id": s["end_id"], "message_count": s["message_count"]})


class RawCaptureLayer(Layer):
    """Every turn, verbatim, append-only; ``summary_id`` NULL until summarized."""

    name = "raw_capture"
    title = "Raw capture"
    #: A turn found only by meaning must be at least this similar (cosine, MiniLM) to be shown in ambient
    #: recall; the fused score is relative to the query's best candidate, so it cannot tell a match from noise.
    min_dense_for_recall = 0.35

    def __init__(self, memory, db: Database) -> None:
        super().__init__()
        self.memory = memory
        self.db = db
        self.retriever = Retriever(memory, db)

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.retriever.close()
        await self.db.close()

    async def reindex(self, progress, full: bool = False) -> dict[str, Any] | None:
        """Turn vectors: those missing, e.g. turns stored before an embedder was loaded (every one with ``full``)."""
        from .reindex import turn_vectors

        return await turn_vectors(self, progress, full)

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        started = time.perf_counter()
        found = await self.retriever.search(query, limit, offset)  # fused: pps_sqlite/retrieval.py
        self.record_latency(started)
        results = [turn_result(t, score=t["score"]) for t in found]
        for r, t in zip(results, found, strict=True):
            r.metadata["scores"] = t["signals"]  # per-signal scores: bm25, dense, fused
        return results

    def relevant(self, result: SearchResult) -> bool:
        scores = result.metadata.get("scores") or {}
        if scores.get("bm25"):  # shares words with the question
            return True
        dense = scores.get("dense")
        if dense is None:  # lexical-only search: here through a name or a date in the question
            return result.score > 0
        return dense >= self.min_dense_for_recall

    async def recent(self, limit: int) -> list[SearchResult]:
        return [turn_result(t) for t in await self.db.run(turns.newest, self.db.conn, limit)]

    async def startup(self, count: int | None) -> StartupItems:
        """ALL unsummarized turns (or the newest ``count``), chronological, with the total."""

        def work(conn):
            return turns.unsummarized_count(conn), turns.unsummarized(conn, count)

        total, found = await self.db.run(work, self.db.conn)
        return StartupItems(items=[turn_result(t) for t in found], total=total)

    async def health(self) -> LayerHealth:
        started = time.perf_counter()
        c = await self.db.run(turns.counts, self.db.conn)
        return LayerHealth(layer=self.name, available=True, detail=str(self.db.path),
                           counts={"messages": c["total"], "unsummarized": c["unsummarized"]},
                           backlog={"unsummarized": c["unsummarized"]},
                           latency_ms=self.recent_latency_ms or round((time.perf_counter() - started) * 1000, 2))

    # -- what other plugins use ---------------------------------------------------------------

    async def store(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        acks, new = await self.db.run(turns.store, self.db.conn, batch)
        await self.retriever.index(new)
        for t in new:
            self.memory.notify("pps_message_stored", message=Message(**t))
        return acks

    async def pending_ingestion(self, limit: int) -> list[Message]:
        return [Message(**t) for t in await self.db.run(turns.pending_ingestion, self.db.conn, limit)]

    async def mark_ingested(self, ids: list[int]) -> int:
        return await self.db.run(turns.mark_ingested, self.db.conn, list(ids))

    async def count_uningested(self) -> int:
        return (await self.db.run(turns.counts, self.db.conn))["uningested"]

    async def unread_for_recall(self, consumer_key: str, channel: str | None) -> StartupItems | None:
        found = await self.db.run(lambda c: turns.poll(c, consumer_key, channel, UNREAD_PREVIEW,
                                                       newest_first_preview=True), self.db.conn)
        if not found["turns"]:
            return None
        more = None
        if found["oldest_unread_at"]:  # the preview marked everything read: point at all of it by time
            more = {"operation": "get_turns_since",
                    "params": {"timestamp": found["oldest_unread_at"], "limit": min(1000, found["unread_total"] * 4)}}
        return StartupItems(items=[turn_result(t) for t in found["turns"]], total=found["unread_total"], more=more)


class SummariesLayer(Layer):
    """Summaries of turns: FTS5, newest first at startup."""

    name = "message_summaries"
    title = "Summaries"

    def __init__(self, memory, db: Database, raw: RawCaptureLayer) -> None:
        super().__init__()
        self.memory = memory
        self.db = db
        self.raw = raw
        self.index = SummaryIndex(memory, db)

    async def reindex(self, progress, full: bool = False) -> dict[str, Any] | None:
        """Summary vectors: those missing (every one with ``full``)."""
        from .reindex import summary_vectors

        return await summary_vectors(self, progress, full)

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        """Hybrid (BM25 + summary vectors) when an embedder is loaded, BM25 otherwise."""
        started = time.perf_counter()
        found = await self.index.search(query, limit, offset)
        self.record_latency(started)
        results = [summary_result(s, s["score"]) for s in found]
        for r, s in zip(results, found, strict=True):
            r.metadata["scores"] = s["signals"]
        return results

    async def recent(self, limit: int) -> list[SearchResult]:
        found = await self.db.run(summaries.recent, self.db.conn, limit)
        return [summary_result(s) for s in reversed(found)]

    async def health(self) -> LayerHealth:
        n = await self.db.run(summaries.count, self.db.conn)
        return LayerHealth(layer=self.name, available=True, detail=str(self.db.path), counts={"summaries": n},
                           latency_ms=self.recent_latency_ms)

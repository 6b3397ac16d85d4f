"""The turn store: what the raw_capture/message_summaries layers and their operations need from a database.

The operations (``operations.py``) and the layers (``layers.py``) call only this interface, so every backend
that implements it (SQLite here, PostgreSQL in ``pps_postgres``) serves the same operations with the same
edge cases. Turns and summaries are plain dicts (``turns.row_to_turn`` / ``summaries.row_to_summary`` shape),
timestamps canonical strings (``pps_core.timeutil.to_storage``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from . import summaries, turns
from .db import Database


def context_plan(unsummarized: int, wanted: int, per_summary: int) -> tuple[int | None, int]:
    """get_conversation_context: (how many newest unsummarized turns, None = all; how many newest summaries)."""
    if wanted == 0:
        return 0, 0
    if unsummarized >= wanted:
        return wanted, 0
    return None, math.ceil((wanted - unsummarized) / per_summary)


@runtime_checkable
class TurnStore(Protocol):
    """A database of turns, summaries and read cursors. Every method is atomic on its own."""

    #: Where the data lives (health detail).
    detail: str
    #: The fused turn search: ``search(query, limit, offset, channel, cfg)``, ``index(new)``, ``drain()``,
    #: ``close()`` (``turnindex.Retriever`` on SQLite).
    retriever: Any

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    # turns
    async def store(self, batch: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(acks in input order, newly stored turns); a repeated ``message_id`` answers as the first did."""
        ...

    async def lexical_search(self, query: str, limit: int, offset: int = 0,
                             channel: str | None = None) -> list[dict[str, Any]]:
        """Plain full-text ranking alone (a baseline; the layers search through ``retriever``)."""
        ...

    async def newest(self, limit: int) -> list[dict[str, Any]]: ...
    async def counts(self) -> dict[str, int]:
        """total, unsummarized, uningested."""
        ...

    async def unsummarized_page(self, limit: int | None, offset: int = 0, *, oldest_first: bool = False,
                                channel: str | None = None) -> tuple[int, list[dict[str, Any]]]:
        """(unsummarized count in ``channel``, a chronological page counted from the newest or the oldest)."""
        ...

    async def since(self, ts: str, limit: int, include_summaries: bool) -> tuple[list[dict], bool, list[dict]]:
        """(turns at or after ``ts`` by time, truncated?, summaries overlapping it)."""
        ...

    async def around(self, ts: str, before: int, after: int) -> tuple[list[dict], list[dict]]: ...
    async def context(self, wanted: int, per_summary: int) -> tuple[int, list[dict], list[dict]]:
        """(unsummarized count, summaries oldest first, raw turns) as planned by :func:`context_plan`."""
        ...

    async def poll(self, consumer: str, channel: str | None, limit: int, *,
                   newest_first_preview: bool = False) -> dict[str, Any]: ...
    async def pending_ingestion(self, limit: int) -> list[dict[str, Any]]: ...
    async def mark_ingested(self, ids: list[int]) -> int: ...

    # forgetting
    async def in_range(self, channel: str, since: str, until: str) -> list[int]:
        """Ids of turns in ``channel`` (or under it) with since <= created_at < until, in time order."""
        ...

    async def forget(self, ids: list[int], who: str, how: str) -> dict[str, Any]:
        """Delete turns, their full text and vectors for good; flag the summaries that covered them; log ids,
        time and who (never content). ``{"forgotten", "not_found", "summaries_flagged"}``."""
        ...

    async def forget_log(self, limit: int, offset: int = 0) -> tuple[int, list[dict[str, Any]]]: ...

    # summaries
    async def store_summary(self, text: str, *, start_id: int | None, end_id: int | None,
                            message_ids: list[int] | None, channels: list[str] | None,
                            summary_type: str) -> dict[str, Any]: ...
    async def recent_summaries(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """Newest first."""
        ...

    async def search_summaries(self, query: str, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """Hybrid when an embedder is loaded; each with ``score`` and ``signals``."""
        ...

    async def summary_stats(self) -> dict[str, Any]: ...
    async def summary_count(self) -> int: ...
    async def needs_rewrite(self) -> list[dict[str, Any]]:
        """Summaries flagged for rewrite, ``[{"id", "reason"}]`` (reason 'backfill' or 'forgotten')."""
        ...

    # derived indexes
    async def reindex_turns(self, progress: Callable[[int, int], None], full: bool) -> dict[str, Any] | None: ...
    async def reindex_summaries(self, progress: Callable[[int, int], None],
                                full: bool) -> dict[str, Any] | None: ...


async def forget_vectors(retriever: Any, ids: list[int]) -> None:
    """Forgotten turns leave the retriever's in-memory vectors and author names: the matrix is dropped and
    reloaded from the (now smaller) vector table at the next search."""
    if not ids:
        return
    if hasattr(retriever, "forget"):
        await retriever.forget(ids)
        return
    retriever.vectors = None
    retriever._authors = None


class SQLiteStore:
    """:class:`TurnStore` on one SQLite file; every call runs on the database's worker thread."""

    def __init__(self, memory, db: Database) -> None:
        from .summaryindex import SummaryIndex
        from .turnindex import Retriever

        self.memory = memory
        self.db = db
        self.retriever = Retriever(memory, db)
        self.index = SummaryIndex(memory, db)

    @property
    def detail(self) -> str:
        return str(self.db.path)

    async def _run(self, fn, *args):
        return await self.db.run(fn, self.db.conn, *args)

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.retriever.close()
        await self.db.close()

    async def store(self, batch):
        return await self._run(turns.store, batch)

    async def lexical_search(self, query, limit, offset=0, channel=None):
        return await self._run(turns.search, query, limit, offset, channel)

    async def newest(self, limit):
        return await self._run(turns.newest, limit)

    async def counts(self):
        return await self._run(turns.counts)

    async def unsummarized_page(self, limit, offset=0, *, oldest_first=False, channel=None):
        def work(conn):
            return (turns.unsummarized_count(conn, channel),
                    turns.unsummarized(conn, limit, offset, oldest_first=oldest_first, channel=channel))

        return await self._run(work)

    async def since(self, ts, limit, include_summaries):
        def work(conn):
            msgs, more = turns.since(conn, ts, limit)
            return msgs, more, summaries.overlapping(conn, ts) if include_summaries else []

        return await self._run(work)

    async def around(self, ts, before, after):
        return await self._run(turns.around, ts, before, after)

    async def context(self, wanted, per_summary):
        def work(conn):
            count = turns.unsummarized_count(conn)
            n_raw, n_sums = context_plan(count, wanted, per_summary)
            raw = turns.unsummarized(conn, n_raw) if n_raw != 0 else []
            return count, summaries.recent(conn, n_sums)[::-1] if n_sums else [], raw

        return await self._run(work)

    async def poll(self, consumer, channel, limit, *, newest_first_preview=False):
        return await self._run(lambda c: turns.poll(c, consumer, channel, limit,
                                                    newest_first_preview=newest_first_preview))

    async def pending_ingestion(self, limit):
        return await self._run(turns.pending_ingestion, limit)

    async def mark_ingested(self, ids):
        return await self._run(turns.mark_ingested, list(ids))

    async def in_range(self, channel, since, until):
        return await self._run(turns.in_range, channel, since, until)

    async def forget(self, ids, who, how):
        out = await self._run(turns.forget, list(ids), who, how)
        await forget_vectors(self.retriever, out["forgotten"])
        return out

    async def forget_log(self, limit, offset=0):
        return await self._run(turns.forget_log, limit, offset)

    async def store_summary(self, text, *, start_id, end_id, message_ids, channels, summary_type):
        return await self._run(lambda c: summaries.store(c, text, start_id=start_id, end_id=end_id,
                                                         message_ids=message_ids, channels=channels,
                                                         summary_type=summary_type))

    async def recent_summaries(self, limit, offset=0):
        return await self._run(summaries.recent, limit, offset)

    async def search_summaries(self, query, limit, offset=0):
        return await self.index.search(query, limit, offset)

    async def summary_stats(self):
        return await self._run(summaries.stats)

    async def summary_count(self):
        return await self._run(summaries.count)

    async def needs_rewrite(self):
        return await self._run(summaries.needs_rewrite)

    async def reindex_turns(self, progress, full):
        from .reindex import turn_vectors

        return await turn_vectors(self, progress, full)

    async def reindex_summaries(self, progress, full):
        from .reindex import summary_vectors

        return await summary_vectors(self, progress, full)

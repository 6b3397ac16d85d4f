"""``pps_turns.TurnStore`` on one SQLite file: writes run on the database's worker thread, reads on its reader
threads (``Database.read``), so a search neither waits for a write nor for another layer's search.

The SQL lives in ``turns.py`` (turns, cursors, forgetting, browsing), ``summaries.py``, ``lexical.py`` (FTS5
BM25, bounded over a long history), ``turnindex.py`` (turn vectors: the matrix and the HNSW index) and
``summaryindex.py``; this class only runs it. The turn domain (``pps_turns``) does the rest.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pps_turns import context_plan

from . import lexical, summaries, summaryindex, turnindex, turns
from .db import Database, SQLiteSettings, Tx


def _drop(conn, table: str) -> int:
    with Tx(conn):
        return conn.execute(f"DELETE FROM {table}").rowcount  # every model's: old embedders' vectors go too


def _count_missing_turns(conn, model: str) -> int:
    return conn.execute("SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM message_vectors v "
                        "WHERE v.message_id = m.id AND v.model = ?)", (model,)).fetchone()[0]


def _count_missing_summaries(conn, model: str) -> int:
    return conn.execute("SELECT COUNT(*) FROM message_summaries s WHERE NOT EXISTS (SELECT 1 FROM summary_vectors v "
                        "WHERE v.summary_id = s.id AND v.model = ?)", (model,)).fetchone()[0]


class SQLiteStore:
    """:class:`pps_turns.TurnStore` (and ``BrowsableTurnStore``) on ``<home>/pps.db``."""

    exclusive = True  # an embedded file: one process at a time (to write; readers may glance: open_glance)

    def __init__(self, db: Database, home: Path | None = None, ann_threshold: int | None = None,
                 ann_dtype: str | None = None) -> None:
        self.db = db
        self.home = home
        self.dense = turnindex.TurnIndex(db, ann_threshold or SQLiteSettings.model_fields["ann_threshold"].default,
                                         ann_dtype or SQLiteSettings.model_fields["ann_dtype"].default)
        self.summary_matrix = summaryindex.SummaryMatrix()
        self._df = lexical.DocFreq()
        #: The turn vectors' matrix and index are read by searches (reader threads) and changed by writes (the
        #: worker): one at a time. A search takes it before its first SELECT, so what it loads is never older
        #: than a forget that already ran.
        self._dense_lock = threading.Lock()

    @classmethod
    def for_memory(cls, memory: Any) -> SQLiteStore:
        settings = memory.settings.plugin_settings(SQLiteSettings, "sqlite")
        home = Path(memory.home)
        return cls(Database(home / settings.file, settings.busy_timeout_ms), home, settings.ann_threshold,
                   settings.ann_dtype)

    @property
    def detail(self) -> str:
        return str(self.db.path)

    @property
    def derived_paths(self) -> tuple[str, ...]:
        """The turn-vector index files, home-relative (backups skip them; they are rebuilt from SQLite)."""
        from .ann import paths

        if self.home is None:
            return ()
        try:
            return tuple(str(p.relative_to(self.home)) for p in paths(self.db.path))
        except ValueError:  # the database outside the home: nothing of the home to skip
            return ()

    async def _run(self, fn, *args):
        """``fn(conn, *args)`` on the writer's thread and connection."""
        return await self.db.run(fn, self.db.conn, *args)

    async def _read(self, fn, *args):
        """``fn(conn, *args)`` on a reader thread and connection (``fn`` only reads)."""
        return await self.db.read(fn, *args)

    async def _run_dense(self, fn, *args):
        """``fn(conn, *args)`` on the writer's thread holding the index's lock, the lock waited for on a thread of
        its own: while ``pps reindex`` builds the index (a reader holding the lock for minutes) the writer's thread
        stays free for captures; only this call waits."""
        import asyncio

        await asyncio.to_thread(self._dense_lock.acquire)
        try:
            return await self._run(fn, *args)
        finally:
            self._dense_lock.release()

    def _dense(self, fn):
        def locked(*args):
            with self._dense_lock:
                return fn(*args)

        return locked

    async def open(self) -> None:
        await self.db.open()

    async def open_glance(self) -> None:
        """``pps_turns.GlanceableStore``: read-only beside the owner; the turn-vector index is not loaded (a
        glance searches by words), so nothing but SQLite is touched."""
        await self.db.open_readonly()

    async def close(self) -> None:
        await self.dense.close()
        await self.db.close()

    # -- turns ----------------------------------------------------------------------------------

    async def store(self, batch):
        # one transaction, nothing but SQL: written inline when the writer is idle (Database.write)
        return await self.db.write(turns.store, batch)

    async def turns_by_ids(self, ids):
        return await self._read(turns.by_ids, list(ids))

    async def newest(self, limit):
        return await self._read(turns.newest, limit)

    async def counts(self):
        return await self._read(turns.counts)

    async def unsummarized_page(self, limit, offset=0, *, oldest_first=False, channel=None):
        def work(conn):
            return (turns.unsummarized_count(conn, channel),
                    turns.unsummarized(conn, limit, offset, oldest_first=oldest_first, channel=channel))

        return await self._read(work)

    async def since(self, ts, limit, include_summaries):
        def work(conn):
            msgs, more = turns.since(conn, ts, limit)
            return msgs, more, summaries.overlapping(conn, ts) if include_summaries else []

        return await self._read(work)

    async def around(self, ts, before, after):
        return await self._read(turns.around, ts, before, after)

    async def context(self, wanted, per_summary):
        def work(conn):
            count = turns.unsummarized_count(conn)
            n_raw, n_sums = context_plan(count, wanted, per_summary)
            raw = turns.unsummarized(conn, n_raw) if n_raw != 0 else []
            return count, summaries.recent(conn, n_sums)[::-1] if n_sums else [], raw

        return await self._read(work)

    async def poll(self, consumer, channel, limit, *, newest_first_preview=False):
        return await self._run(lambda c: turns.poll(c, consumer, channel, limit,
                                                    newest_first_preview=newest_first_preview))

    async def pending_ingestion(self, limit):
        return await self._read(turns.pending_ingestion, limit)

    async def mark_ingested(self, ids):
        return await self._run(turns.mark_ingested, list(ids))

    async def author_names(self):
        return await self._read(lexical.author_names)

    # -- browsing -------------------------------------------------------------------------------

    async def list_turns(self, **query):
        return await self._read(lambda c: turns.list_page(c, **query))

    async def activity(self, start, end, width):
        return await self._read(turns.activity, start, end, width)

    # -- forgetting -----------------------------------------------------------------------------

    async def in_range(self, channel, since, until):
        return await self._read(turns.in_range, channel, since, until)

    async def forget(self, ids, who, how, owed=()):
        out = await self._run(turns.forget, list(ids), who, how, list(owed))
        if out["forgotten"]:
            await self._run_dense(self.dense.forget, out["forgotten"])
            self.summary_matrix.invalidate()
        return out

    async def owed_forgets(self, texts=False):
        return await self._read(turns.owed_forgets, texts)

    async def settle_forget(self, owed_id, confirmed):
        return await self._run(turns.settle_forget, owed_id, list(confirmed))

    async def save_forget_token(self, token_digest, query_digest, ids, expires_at, now):
        await self._run(turns.save_forget_token, token_digest, query_digest, list(ids), expires_at, now)

    async def take_forget_token(self, token_digest, query_digest, now):
        return await self._run(turns.take_forget_token, token_digest, query_digest, now)

    async def forget_log(self, limit, offset=0):
        return await self._read(turns.forget_log, limit, offset)

    # -- summaries ------------------------------------------------------------------------------

    async def store_summary(self, text, *, start_id, end_id, message_ids, channels, summary_type, created_at=None):
        return await self._run(lambda c: summaries.store(c, text, start_id=start_id, end_id=end_id,
                                                         message_ids=message_ids, channels=channels,
                                                         summary_type=summary_type, created_at=created_at))

    async def recent_summaries(self, limit, offset=0):
        return await self._read(summaries.recent, limit, offset)

    async def summaries_by_ids(self, ids):
        ids = list(ids)
        return await self._read(summaryindex._by_ids, ids) if ids else []

    async def summary_stats(self):
        return await self._read(summaries.stats)

    async def summary_count(self):
        return await self._read(summaries.count)

    async def needs_rewrite(self):
        return await self._read(summaries.needs_rewrite)

    # -- full text ------------------------------------------------------------------------------

    async def lexical_turns(self, terms, n, channel=None, budget=0):
        return await self._read(lexical.bm25_bounded, terms, n, channel, budget, self._df)

    async def term_counts(self, terms, cap):
        def work(conn):
            total = conn.execute("SELECT n FROM counters WHERE name = 'messages'").fetchone()[0]
            return total, {t: self._df(conn, t, cap, total) for t in terms}

        return await self._read(work)

    async def channel_neighbours(self, ids, reach):
        return await self._read(turnindex.channel_pairs, list(ids), reach) if ids else []

    async def lexical_summaries(self, query, n):
        return await self._read(summaries.search, query, n, 0)

    # -- vectors --------------------------------------------------------------------------------

    async def turns_missing_vectors(self, model, limit, after):
        return await self._read(turnindex.missing_upto, model, limit, after)

    async def write_turn_vectors(self, model, batch, vectors):
        await self._run_dense(self.dense.write, model, batch, vectors)

    async def count_turns_missing_vectors(self, model):
        return await self._read(_count_missing_turns, model)

    async def drop_turn_vectors(self):
        def work(conn):
            dropped = _drop(conn, "message_vectors")
            self.dense.drop(conn)  # the HNSW files go too; rebuilt by repair_turn_index
            return dropped

        return await self._run(self._dense(work))

    async def turn_similarities(self, model, qvec, n, context, channel=None):
        return await self._read(self._dense(self.dense.similarities), model, qvec, n, context)

    async def channel_similarities(self, model, qvec, channels, n, context):
        return await self._read(self._dense(self.dense.channel_similarities), model, qvec, list(channels), n,
                                context)

    async def repair_turn_index(self, model):
        # on a reader's thread and connection: the build only reads (the vectors; it writes the index's files),
        # so captures go on meanwhile (on the writer's thread it held them for minutes at 200,000 vectors);
        # vector writes and forgets wait for it on the index's lock, so none is missed or kept
        return await self._read(self._dense(self.dense.repair_ann), model)

    async def summaries_missing_vectors(self, model, limit, after):
        rows, top = await self._read(summaryindex._missing_upto, model, limit, after)
        return [(r[0], r[1]) for r in rows], top

    async def write_summary_vectors(self, model, ids, vectors):
        await self._run(summaryindex._write, model, list(zip(ids, vectors, strict=True)))
        self.summary_matrix.invalidate()

    async def count_summaries_missing_vectors(self, model):
        return await self._read(_count_missing_summaries, model)

    async def drop_summary_vectors(self):
        dropped = await self._run(_drop, "summary_vectors")
        self.summary_matrix.invalidate()
        return dropped

    async def summary_similarities(self, model, qvec, n):
        return await self._read(self.summary_matrix.similarities, model, qvec, n)
